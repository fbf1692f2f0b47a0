"""How memory-api's Server-Timing shares out overlapping waits (memento_memory_api.server_timing), and how the bench
reads the header back (bench.stages): spans on a made-up clock, so each figure is known exactly."""

from __future__ import annotations

import pytest

from bench import stages as bench_stages
from memento_memory_api.server_timing import Stages


def spans(*items: tuple[str, float, float]) -> Stages:
    timed = Stages()
    timed.started = 0.0
    timed.spans = list(items)
    return timed


def test_overlapping_time_goes_to_the_first_stage_under_way_and_the_rest_to_none():
    # the question embeds 10-50 while statements run 0-20 and 45-70; the fresh rows' vectors arrive at 60
    timed = spans(("db", 0, 20), ("embed", 10, 50), ("fresh", 10, 60), ("db", 45, 70), ("pool", 80, 85))
    out = timed.durations(100)
    assert out == pytest.approx({"embed": 40, "fresh": 10, "pool": 5, "db": 10 + 10, "total": 100})
    assert sum(v for k, v in out.items() if k != "total") <= out["total"]


def test_spans_are_cut_to_the_call_and_concurrent_ones_of_a_stage_count_once():
    timed = spans(("embed", -5, 10), ("embed", 5, 15), ("db", 90, 130))
    assert timed.durations(100) == pytest.approx({"embed": 15, "fresh": 0, "pool": 0, "db": 10, "total": 100})


def test_the_bench_reads_each_calls_stages_and_the_remainders():
    header = "embed;dur=40.0, fresh;dur=0.0, pool;dur=0.5, db;dur=9.5, total;dur=60.0, gateway;dur=66.0"
    calls = [(0.070, header), (0.080, None)]  # the second call's answer had no header: left out, and counted
    summary = bench_stages.summary(calls)
    assert summary["calls"] == 1 and summary["untimed_calls"] == 1
    assert summary["other"]["p50_ms"] == 10.0 and summary["hop"]["p50_ms"] == 10.0
    assert summary["gateway_own"]["p50_ms"] == 6.0 and summary["embed"]["p95_ms"] == 40.0
