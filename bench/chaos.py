"""Faults under load (issue 31 item 4): while the mixed load runs through two gateway replicas, kill -9 each
component in turn and start it again; afterwards, every acknowledged write must be present exactly once with what
it wrote, embedded and evaluated, with no dead letters.

    python -m bench.chaos                       # every component, ~20 calls/s
    python -m bench.chaos --components memory-api,valkey --rate 10

Per fault it reports the errors the clients saw (calls that ended from the kill until the next fault's kill) and
the seconds from the kill until the system served again (the first successful call among those started after the
last failed one started). Writes JSON to bench/results/chaos-<timestamp>.json and prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bench.cluster import COMPONENTS, Cluster
from bench.mixed_load import Call, LoadThread, MixedLoad, verify
from bench.report import save

WORKSPACE = "chaos"


@dataclass
class Fault:
    component: str
    killed_at: float
    restarted_at: float = 0.0
    restart_s: float = 0.0


def inject(cluster: Cluster, component: str, down_s: float) -> Fault:
    fault = Fault(component, time.monotonic())
    cluster.kill(component)
    time.sleep(down_s)  # down long enough for clients to notice, as a crash before its supervisor restarts it
    fault.restart_s = cluster.restart(component)
    fault.restarted_at = time.monotonic()
    return fault


def _start(call: Call) -> float:
    return call.started


def per_fault(faults: list[Fault], calls: list[Call], until: float) -> list[dict]:
    """The errors seen from each kill until the next one, and how long until calls succeeded again."""
    out = []
    for i, fault in enumerate(faults):
        end = faults[i + 1].killed_at if i + 1 < len(faults) else until
        # calls that ended from this kill to the next: one under way at a kill counts for that kill's fault
        window = sorted((c for c in calls if fault.killed_at <= c.started + c.seconds < end), key=_start)
        failed = [c for c in window if c.error]
        # served again: the first call that succeeded among those started after the last failed one started (a call
        # that hung until its timeout must not hide the others served meanwhile)
        last_failure = max((c.started for c in failed), default=fault.killed_at)
        served = min(
            (c for c in window if not c.error and c.started > last_failure),
            key=lambda c: c.started + c.seconds,
            default=None,
        )
        out.append(
            {
                "component": fault.component,
                "down_s": round(fault.restarted_at - fault.restart_s - fault.killed_at, 2),
                "restart_s": round(fault.restart_s, 2),
                "calls": len(window),
                "errors": len(failed),
                "error_kinds": dict(Counter(c.error for c in failed)),
                "longest_failed_call_s": round(max((c.seconds for c in failed), default=0.0), 2),
                # each failed call: seconds from the kill to its start, its duration, the gateway it went to
                "failed_calls": [
                    [round(c.started - fault.killed_at, 2), round(c.seconds, 2), c.gateway, c.op, c.error]
                    for c in failed
                ],
                # None: nothing succeeded before the next fault (a finding in itself)
                "served_again_after_s": None
                if served is None
                else round(served.started + served.seconds - fault.killed_at, 2),
            }
        )
    return out


def run_chaos(
    cluster: Cluster,
    components: list[str],
    *,
    rate: float,
    clients: int,
    warmup_s: float,
    down_s: float,
    settle_s: float,
    verify_timeout_s: float,
) -> dict:
    """The faults under load on a started cluster; the report as a dict (used by the test as well)."""
    load = MixedLoad(cluster.mcp_urls, cluster.access_key, WORKSPACE, rate, clients=clients)
    thread = LoadThread(load).start()
    faults: list[Fault] = []
    try:
        time.sleep(warmup_s)
        for component in components:
            faults.append(inject(cluster, component, down_s))
            time.sleep(settle_s)
    finally:
        thread.stop()
    ended = time.monotonic()
    checked = asyncio.run(verify(cluster.owner_url(), load.state, WORKSPACE, verify_timeout_s))
    with load.state.lock:
        calls = list(load.state.calls)
    before = [c for c in calls if not faults or c.started + c.seconds < faults[0].killed_at]
    checks = {
        "lost": checked["lost"],
        "unacknowledged_stored_twice": checked["unacknowledged_present_twice"],
        "not_embedded": checked["not_embedded"],
        "not_evaluated": checked["not_evaluated"],
        "dead_letters": len(checked["dead_letters"]),
        "errors_before_first_fault": sum(1 for c in before if c.error),
    }
    checks["pass"] = not any(checks.values())
    return {
        "rate_per_s": rate,
        "clients": clients,
        "calls": len(calls),
        "achieved_rate_per_s": round(len(calls) / max(1.0, ended - calls[0].started), 2) if calls else 0,
        "checks": checks,
        "errors_before_first_fault": dict(Counter(f"{c.op} {c.error}" for c in before if c.error)),
        "faults": per_fault(faults, calls, ended),
        "writes": checked,
    }


def print_table(results: dict) -> None:
    print(
        f"\nchaos: {results['calls']} calls at {results['achieved_rate_per_s']}/s, "
        f"{results['writes']['acknowledged_writes']} acknowledged writes"
    )
    header = f"{'component':14} {'down s':>7} {'restart s':>9} {'calls':>6} {'errors':>6} {'served again s':>15}"
    header += f" {'longest failed s':>16}"
    print(header + "  errors seen")
    for f in results["faults"]:
        kinds = ", ".join(f"{k} x{n}" for k, n in f["error_kinds"].items()) or "-"
        served = "never" if f["served_again_after_s"] is None else f["served_again_after_s"]
        print(
            f"{f['component']:14} {f['down_s']:>7} {f['restart_s']:>9} {f['calls']:>6} {f['errors']:>6} {served:>15}"
            f" {f['longest_failed_call_s']:>16}"
            f"  {kinds}"
        )
    w, c = results["writes"], results["checks"]
    print(
        f"writes: {w['acknowledged_writes']} acknowledged, {w['lost']} lost (missing {len(w['missing'])}, changed"
        f" {len(w['changed'])}, duplicated {len(w['duplicated'])}); {w['unacknowledged_writes']} unacknowledged, of"
        f" which {w['unacknowledged_present']} stored (at most once: {c['unacknowledged_stored_twice'] == 0})"
    )
    print(
        f"workers: {w['not_embedded']} not embedded, {w['not_evaluated']} not evaluated after"
        f" {w['settle_seconds']} s; dead letters {len(w['dead_letters'])}"
    )
    print("PASS" if c["pass"] else f"FAIL: {c}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--components", default=",".join(COMPONENTS), help=f"in order; default {','.join(COMPONENTS)}")
    parser.add_argument("--rate", type=float, default=20.0, help="calls per second, all clients together")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--warmup", type=float, default=15.0, help="seconds of load before the first fault")
    parser.add_argument("--down", type=float, default=3.0, help="seconds a killed component stays down")
    parser.add_argument("--settle", type=float, default=20.0, help="seconds of load after each restart")
    parser.add_argument("--verify-timeout", type=float, default=300.0, help="wait for embeddings and evaluations")
    parser.add_argument("--data-dir", help="where the system keeps its data (default: a fresh temporary folder)")
    args = parser.parse_args()
    components = [c.strip() for c in args.components.split(",") if c.strip()]
    unknown = sorted(set(components) - set(COMPONENTS))
    if unknown:
        parser.error(f"--components: unknown {unknown}; choose from {', '.join(COMPONENTS)}")
    data_dir = Path(args.data_dir or tempfile.mkdtemp(prefix="memento-chaos-")) / "data"
    with Cluster(data_dir) as cluster:
        results = run_chaos(
            cluster,
            components,
            rate=args.rate,
            clients=args.clients,
            warmup_s=args.warmup,
            down_s=args.down,
            settle_s=args.settle,
            verify_timeout_s=args.verify_timeout,
        )
    results = {
        "command": "python -m bench.chaos " + " ".join(sys.argv[1:]),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        **results,
    }
    print_table(results)
    save(results, "chaos")
    sys.exit(0 if results["checks"]["pass"] else 1)


if __name__ == "__main__":
    main()
