"""Who wakes an idle system, and what it costs: every service of `make run` started in a fresh data dir, left idle,
then per thread over `--seconds` its wake-ups (voluntary context switches) and CPU time from /proc (`schedstat`, in
nanoseconds: finer than the clock ticks bench.server_cpu reads, which count 0.017 % of a core a process over a
minute). Linux only. Issue 50's idle goal: the whole system under 1 % of one core.

    python -m bench.idle_threads --settle 100 --seconds 60
"""

from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict

import psutil

from bench.report import save
from bench.run import System

SERVICES = ("gateway", "memory_api", "embedder", "evaluator", "consolidator")


def component(process: psutil.Process) -> str:
    """The service a process belongs to (a child the embedder forked counts as the embedder), or its own name."""
    command = " ".join(process.cmdline())
    if "multiprocessing" in command:
        command = " ".join(process.parent().cmdline())
    return next((s for s in SERVICES if f"memento_{s}" in command), process.name())


def snapshot(root: int) -> dict[tuple[str, int, int, str], tuple[int, int]]:
    """(component, pid, tid, thread name) -> (voluntary context switches, ns on a CPU) for every thread below root."""
    out = {}
    for process in psutil.Process(root).children(recursive=True):
        try:
            name = component(process)
            for tid in os.listdir(f"/proc/{process.pid}/task"):
                task = f"/proc/{process.pid}/task/{tid}"
                with open(f"{task}/status") as handle:
                    status = dict(line.split(":\t", 1) for line in handle if ":\t" in line)
                with open(f"{task}/schedstat") as handle:
                    cpu_ns = int(handle.read().split()[0])
                key = (name, process.pid, int(tid), status["Name"].strip())
                out[key] = (int(status["voluntary_ctxt_switches"]), cpu_ns)
        except (OSError, psutil.Error):  # a process or thread that ended meanwhile
            continue
    return out


def measure(root: int, seconds: float) -> dict:
    before = snapshot(root)
    time.sleep(seconds)
    after = snapshot(root)
    threads, components = [], defaultdict(lambda: [0.0, 0.0])
    for key, (wakes, cpu_ns) in after.items():
        then = before.get(key, (0, 0))
        rate, share = (wakes - then[0]) / seconds, (cpu_ns - then[1]) / 1e7 / seconds  # wake-ups/s, % of a core
        if rate or share:
            threads.append({"component": key[0], "pid": key[1], "thread": key[3], "wakes_s": rate, "cpu_pct": share})
        components[key[0]][0] += rate
        components[key[0]][1] += share
    return {
        "seconds": seconds,
        "threads": sorted(threads, key=lambda t: -t["cpu_pct"]),
        "components": {
            k: {"wakes_s": round(v[0], 2), "cpu_pct": round(v[1], 3)} for k, v in sorted(components.items())
        },
        "total": {
            "wakes_s": round(sum(v[0] for v in components.values()), 2),
            "cpu_pct": round(sum(v[1] for v in components.values()), 3),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settle", type=float, default=100.0, help="idle seconds after the start before measuring")
    parser.add_argument("--seconds", type=float, default=60.0, help="the measured window")
    parser.add_argument("--port", type=int, default=56463, help="gateway port of the started system")
    parser.set_defaults(url=None, key=None, data_dir=None)
    args = parser.parse_args()
    system = System(args)
    system.start()
    try:
        time.sleep(args.settle)
        results = measure(system.process.pid, args.seconds)
    finally:
        system.stop()
    for t in results["threads"]:
        print(f"  {t['component']:14} {t['pid']:>7} {t['thread']:16} {t['wakes_s']:7.2f} /s {t['cpu_pct']:7.3f} %")
    print(f"{'component':16} wake-ups/s  % of a core")
    for name, c in {**results["components"], "total": results["total"]}.items():
        print(f"{name:16} {c['wakes_s']:10.2f} {c['cpu_pct']:11.3f}")
    save(results, "idle-threads")


if __name__ == "__main__":
    main()
