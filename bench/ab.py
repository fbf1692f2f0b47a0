"""Recall by text with the shipped relevance order against plain fusion, alternating on one store (issue 28: "the
latency rows of recall by text unchanged within the run's noise, printed beside the new quality figures").

Two memory-api apps run in this process on a started system's store (create_app, the system's database, Valkey,
embedder and internal secret; the rest of the settings from the environment, as the launcher gives its memory-api):

- shipped: the default RECALL_* settings (context list, neighbours of the first candidates read, time boost, lift);
- plain:   OFF (the engine's lists fused by RRF, no neighbours read);
- with `control`, plain's settings in shipped's place too: what the method reads when nothing differs, the run's
  own noise (bench.relevance_latency --control).

Every question is asked as `recall {text}` (includeLinks false, the default token budget) on both apps in the order
A B B A, the app that is A alternating from question to question: slow drift of a loaded machine falls on both alike,
and the paired difference per question (mean of the two shipped calls − mean of the two plain ones) cancels it. Each
app's query-embedding cache is emptied before every call, so every call pays the model as a new question does; the
query embedding alone (the embedder's /v1/embeddings, input_type query, through the client memory-api uses) is timed
in the same loop: the floor SPEC's "p95 ≤ query embedding + 20 ms" is read against. Used by bench.relevance_latency
and, after its gathering, by bench.locomo.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import httpx
import numpy as np

from bench.report import percentiles
from bench.run import System
from memento_memory_api.app import create_app
from memento_memory_api.settings import MemoryApiSettings
from memento_shared import heap
from memento_shared.internal_http import InternalClient
from memento_shared.principal import HEADER, SCOPES, Principal, encode_principal

APPS = ("shipped", "plain")
# plain: issue 28's order off, and issue 53's stems, answer lift, question discount, rounds, context floor and hop
OFF = {"RECALL_CONTEXT_WEIGHT": "0", "RECALL_LIFT": "0", "RECALL_TIME_BOOST": "0", "RECALL_ANSWER_LIFT": "0",
       "RECALL_QUESTION_DISCOUNT": "0", "RECALL_STEMS": "false", "RECALL_ROUNDS": "0",
       "RECALL_CONTEXT_FLOOR": "0", "RECALL_HOP": "0"}  # fmt: skip
ARGUMENTS = {"includeLinks": False}  # beside `text`; the default token budget, as agents call it
BOOTSTRAP = 2000


class App:
    """One memory-api in this process (its real lifespan), called as the gateway calls it."""

    def __init__(self, name: str, system: System, overrides: dict[str, str]) -> None:
        self.name = name
        self.overrides = overrides  # the RECALL_* settings it runs with instead of the defaults
        settings = settings_for(system, overrides)
        self.app = create_app(settings)
        self.secret = settings.internal_secret
        self.client: httpx.AsyncClient | None = None

    async def start(self, stack: AsyncExitStack) -> App:
        await stack.enter_async_context(self.app.router.lifespan_context(self.app))
        self.client = await stack.enter_async_context(
            httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app), base_url="http://memory-api", timeout=60)
        )
        return self

    async def recall(self, workspace: str, text: str) -> list[str]:
        principal = Principal(tenant_id="default", scopes=SCOPES, workspace=workspace)
        headers = {HEADER: encode_principal(principal, self.secret)}
        response = await self.client.post(
            "/v1/tools/recall", json={"arguments": {"text": text, **ARGUMENTS}}, headers=headers
        )
        body = response.json() if response.status_code == 200 else {"error": {"code": f"HTTP {response.status_code}"}}
        if "error" in body:  # a tool error is an HTTP 200 too: it must not pass for a fast answer
            raise SystemExit(f"bench: recall on {self.name} failed: {body['error']}")
        return [f["id"] for f in body["result"]["fragments"]]

    async def ids(self, sample_questions: dict[str, list[str]]) -> dict[str, list[list[str]]]:
        return {w: [await self.recall(w, t) for t in texts] for w, texts in sample_questions.items()}

    async def timed_recall(self, workspace: str, text: str) -> float:
        self.app.state.embedder.cache.clear()  # every call embeds, as a question not asked before does
        started = time.perf_counter()
        await self.recall(workspace, text)
        return time.perf_counter() - started


def settings_for(system: System, overrides: dict[str, str]) -> MemoryApiSettings:
    return MemoryApiSettings(
        DATABASE_URL=system.info["database_url"],
        REDIS_URL=system.info["redis_url"],
        EMBEDDER_URL=system.service_url("embedder"),
        MEMENTO_INTERNAL_SECRET=system.secrets["internal_secret"],
        **overrides,
    )


@asynccontextmanager
async def apps_on(system: System, control: bool = False) -> AsyncIterator[dict[str, App]]:
    """The shipped and the plain app on `system`'s store, started and stopped with the block (`control`: the shipped
    one with plain's settings)."""
    async with AsyncExitStack() as stack:
        overrides = {"shipped": OFF if control else {}, "plain": OFF}
        apps = {name: App(name, system, overrides[name]) for name in APPS}
        for app in apps.values():
            await app.start(stack)
        yield apps


async def alternate(
    apps: dict[str, App], system: System, asked: list[tuple[str, str]], rounds: int, warmup: int
) -> dict:
    """`warmup` questions unmeasured (pools, caches, the model's first calls), then `rounds` over every (workspace,
    question) of `asked`: the figures `describe` prints."""
    embedder = InternalClient(system.service_url("embedder"), timeout_s=30)  # the client memory-api uses
    try:
        profile = apps["shipped"].app.state.profile.id
        warm = asked[:: max(1, len(asked) // warmup)][:warmup] if warmup else []
        await measure(apps, warm, embedder, profile, 1)
        # as a service's entry point does once started (memento_shared.heap): full collections, which held this
        # process ~120 ms each, then skip what is built by now: the apps, the store's questions, this bench
        heap.settle()
        print(f"bench: warmed up with {len(warm)} questions; measuring {len(asked)} x {rounds}", flush=True)
        started = time.perf_counter()
        times, floor, paired = await measure(apps, asked, embedder, profile, rounds)
        wall = time.perf_counter() - started
    finally:
        await embedder.aclose()
    med, low, high = median_interval(paired)
    p95_d, p95_low, p95_high = p95_difference(times)
    return {
        "questions": len(asked),
        "rounds": rounds,
        "calls_per_app": len(times["shipped"]),
        "arguments": {"text": "<question>", **ARGUMENTS},
        "settings": {name: app.overrides or "defaults" for name, app in apps.items()},
        "latency": {name: stats(times[name]) for name in APPS} | {"query_embedding": stats(floor)},
        "shipped_minus_plain_ms": {
            "median_of_paired": round(med, 2),
            "bootstrap_95": [round(low, 2), round(high, 2)],
            "mean_of_paired": round(1000 * float(np.mean(paired)), 2),
            "pairs": len(paired),
            "p95_difference": round(p95_d, 2),
            "p95_difference_bootstrap_95": [round(p95_low, 2), round(p95_high, 2)],
            "p95_within_noise": p95_low <= 0 <= p95_high,
        },
        "measure_wall_s": round(wall, 1),
    }


async def measure(apps: dict[str, App], asked: list[tuple[str, str]], embedder: InternalClient, profile: str,
                  rounds: int) -> tuple[dict[str, list[float]], list[float], list[float]]:  # fmt: skip
    """R rounds over every question: the embedding floor, then A B B A; returns seconds per app, the floor, and the
    paired difference shipped − plain per question and round."""
    times: dict[str, list[float]] = {name: [] for name in APPS}
    floor, paired = [], []
    for r in range(rounds):
        started = time.perf_counter()
        for n, (workspace, text) in enumerate(asked):
            t0 = time.perf_counter()
            answer = await embedder.post_json(
                "/v1/embeddings", {"input": [text], "input_type": "query", "profile": profile}
            )
            floor.append(time.perf_counter() - t0)
            if answer.status != 200:
                raise SystemExit(f"bench: the embedder answered HTTP {answer.status}")
            a, b = APPS if (n + r) % 2 == 0 else APPS[::-1]
            got: dict[str, list[float]] = {name: [] for name in APPS}
            for name in (a, b, b, a):
                got[name].append(await apps[name].timed_recall(workspace, text))
            for name in APPS:
                times[name].extend(got[name])
            paired.append(float(np.mean(got["shipped"]) - np.mean(got["plain"])))
        print(
            f"bench: round {r + 1}/{rounds}: {len(asked)} questions in {time.perf_counter() - started:.0f}s", flush=True
        )
    return times, floor, paired


def stats(seconds: list[float]) -> dict:
    return percentiles(seconds) | {"mean_ms": round(1000 * float(np.mean(seconds)), 2)}


def median_interval(values: list[float], seed: int = 28) -> tuple[float, float, float]:
    """The median of `values` (ms) and its bootstrap 95 % interval (percentile method, seeded: the same run prints
    the same interval)."""
    x = np.asarray(values) * 1000
    rng = np.random.default_rng(seed)
    medians = np.median(x[rng.integers(0, len(x), size=(BOOTSTRAP, len(x)))], axis=1)
    return float(np.median(x)), float(np.percentile(medians, 2.5)), float(np.percentile(medians, 97.5))


def p95_difference(times: dict[str, list[float]], seed: int = 28) -> tuple[float, float, float]:
    """p95(shipped) − p95(plain) in ms and its bootstrap 95 % interval, resampling questions-and-rounds (each one's
    two calls per app stay together): whether the p95 row itself differs by more than the run's noise."""
    shipped = np.asarray(times["shipped"]).reshape(-1, 2) * 1000
    plain = np.asarray(times["plain"]).reshape(-1, 2) * 1000
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(shipped), size=(BOOTSTRAP, len(shipped)))
    diffs = [np.percentile(shipped[i], 95) - np.percentile(plain[i], 95) for i in picks]
    point = float(np.percentile(shipped, 95) - np.percentile(plain, 95))
    return point, float(np.percentile(diffs, 2.5)), float(np.percentile(diffs, 97.5))


def describe(result: dict) -> list[str]:
    """`alternate`'s figures as a markdown table and the differences, with SPEC's target beside them."""
    lat, d = result["latency"], result["shipped_minus_plain_ms"]
    p95_low, p95_high = d["p95_difference_bootstrap_95"]
    control = result["settings"]["shipped"] != "defaults"
    first = "control" if control else "shipped"
    lines = ["| | p50 ms | p95 ms | mean ms |", "|---|---|---|---|"]
    for name, label in (("shipped", "control (plain's settings too)" if control else "shipped (defaults)"),
                        ("plain", "plain fusion (context, lift, time off)"),
                        ("query_embedding", "query embedding alone (floor)")):  # fmt: skip
        s = lat[name]
        lines.append(f"| {label} | {s['p50_ms']} | {s['p95_ms']} | {s['mean_ms']} |")
    lines += [
        "",
        f"{first} − plain, median of {d['pairs']} paired differences: {d['median_of_paired']:+.2f} ms "
        f"(bootstrap 95 % {d['bootstrap_95'][0]:+.2f} … {d['bootstrap_95'][1]:+.2f}); "
        f"mean {d['mean_of_paired']:+.2f} ms.",
        f"p95 {first} − p95 plain: {d['p95_difference']:+.2f} ms (bootstrap 95 % {p95_low:+.2f} … {p95_high:+.2f}): "
        + ("within the run's noise." if d["p95_within_noise"] else "more than the run's noise."),
    ]
    if not control:
        target = lat["query_embedding"]["p95_ms"] + 20
        shipped = lat["shipped"]["p95_ms"]
        lines.append(f"SPEC target p95 ≤ floor p95 + 20 ms = {target:.2f} ms: shipped p95 {shipped} ms.")
    return lines
