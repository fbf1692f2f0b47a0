"""The capacity model (bench.capacity): generated from the repository's benchmark results, and the table in
docs/scaling.md is the one it generates now (rerun `python -m bench.capacity --write-docs` when a figure changes)."""

from __future__ import annotations

import argparse

import pytest

from bench import capacity


def defaults(**changes) -> argparse.Namespace:
    args = argparse.Namespace(
        agents=list(capacity.AGENTS),
        calls_per_minute=6.0,
        mix="remember=0.3,recall_text=0.4,recall_keywords=0.3",
        fragments_per_agent=2000,
        utilisation=0.6,
    )
    vars(args).update(changes)
    return args


def test_the_table_in_docs_scaling_is_the_one_the_results_give():
    block = capacity.BLOCK.search(capacity.DOCS.read_text())
    assert block is not None
    assert block[0].split("\n", 1)[1].rsplit("\n", 1)[0] == capacity.markdown(capacity.load_inputs(), defaults())


def test_cores_and_data_grow_with_the_fleet_and_the_call_rate():
    inputs = capacity.load_inputs()
    small, large = (capacity.plan(inputs, n, defaults()) for n in (1_000, 10_000))
    busier = capacity.plan(inputs, 1_000, defaults(calls_per_minute=12.0))
    for part in ("gateway", "memory_api", "postgres", "model"):
        assert large[f"{part}_cores"] == pytest.approx(10 * small[f"{part}_cores"])
        assert busier[f"{part}_cores"] == pytest.approx(2 * small[f"{part}_cores"])
    assert large["hnsw_gb"] == pytest.approx(10 * small["hnsw_gb"]) and large["hnsw_gb"] > 0
    assert large["postgres_nodes"] >= small["postgres_nodes"] and large["gateway_replicas"] >= 2


def test_a_tool_without_figures_is_refused_by_name():
    with pytest.raises(SystemExit, match="poke"):
        capacity.plan(capacity.load_inputs(), 1_000, defaults(mix="remember=0.5,poke=0.5"))
