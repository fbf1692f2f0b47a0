"""memory.search's fusion weights, chosen on labelled queries and scored on queries the choice never saw.

bench.documents ranks every query's three lists once; this module then fuses those same lists under each weighting
of a grid (memory-api's own `fuse`), in memory. The queries are split into five folds by the document of their
first answer (so two questions about one section never sit on both sides), and for each fold the weighting best on
the other four (mean of recall@10 and MRR@20) is scored on it: the held-out figure is what the method of choosing
weights earns on questions it was not tuned on. The weighting best on all the queries is what memory-api ships
(settings `DOCUMENT_*`); its own all-query score is printed too, labelled as tuned in-sample.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import asdict, replace

from memento_memory_api.tools.documents import Weights, fuse

FOLDS = 5
DEPTH = 20
# each axis around the seed's defaults (k 60, 0.4 / 0.5 / 0.1, boost 0.15, fixed lexical weight); RRF only reads
# the weights' ratios, so the semantic weight stays at the seed's 0.5
GRID = {
    "k": (10.0, 30.0, 60.0),
    "lexical": (0.1, 0.2, 0.3, 0.4),
    "trigram": (0.05, 0.1, 0.2, 0.3),
    "canonical_boost": (0.0, 0.02, 0.05, 0.15),
    "coverage_power": (0.0, 1.0, 2.0, 4.0),
}


def grid(seed: Weights) -> list[Weights]:
    names = list(GRID)
    return [replace(seed, **dict(zip(names, values, strict=True))) for values in itertools.product(*GRID.values())]


def metrics(query: dict, ranked: list) -> dict[str, float]:
    """recall@5/@10 (share of the query's answers with a hit in the top k) and MRR@20 of one ranking of chunk keys;
    `query["hits"]` maps a chunk key to the answers it satisfies."""
    hits, answers = query["hits"], query["answers"]

    def recall(k: int) -> float:
        return len({a for key in ranked[:k] for a in hits.get(key, ())}) / answers

    first = next((n for n, key in enumerate(ranked[:DEPTH], 1) if hits.get(key)), None)
    return {"recall@5": recall(5), "recall@10": recall(10), "mrr": 1 / first if first else 0.0}


def ranking(query: dict, weights: Weights) -> list:
    return [key for key, _ in fuse(query["lists"], query["canonical"], weights, query["coverage"])]


def mean(per_query: Iterable[dict[str, float]]) -> dict[str, float]:
    rows = list(per_query)
    return {m: round(sum(r[m] for r in rows) / len(rows), 3) for m in ("recall@5", "recall@10", "mrr")}


def objective(queries: list[dict], weights: Weights) -> float:
    scores = mean(metrics(q, ranking(q, weights)) for q in queries)
    return scores["recall@10"] + scores["mrr"]


def best(queries: list[dict], candidates: list[Weights]) -> Weights:
    """The best candidate on these queries; ties go to the earlier one in the grid."""
    scored = [(objective(queries, w), -n, w) for n, w in enumerate(candidates)]
    return max(scored, key=lambda t: t[:2])[2]


def folds(queries: list[dict]) -> list[list[dict]]:
    """Five folds, whole documents each (by the document of a query's first answer), dealt round-robin in the
    documents' sorted order."""
    docs = sorted({q["doc"] for q in queries})
    fold_of = {d: i % FOLDS for i, d in enumerate(docs)}
    return [[q for q in queries if fold_of[q["doc"]] == f] for f in range(FOLDS)]


def tune(queries: list[dict], seed: Weights) -> dict:
    """The held-out figures (each fold scored with the weights chosen on the other four), the weights chosen on
    all the queries, and their in-sample figures; per query type too."""
    candidates = grid(seed)
    held_out: dict[str, dict[str, float]] = {}
    chosen = []
    for fold in folds(queries):
        rest = [q for q in queries if q not in fold]
        weights = best(rest, candidates)
        chosen.append(asdict(weights))
        held_out.update((q["id"], metrics(q, ranking(q, weights))) for q in fold)
    final = best(queries, candidates)
    in_sample = {q["id"]: metrics(q, ranking(q, final)) for q in queries}
    by_type = {}
    for group in ("all", *sorted({q["type"] for q in queries})):
        ids = [q["id"] for q in queries if group in ("all", q["type"])]
        by_type[group] = {
            "held_out": mean(held_out[i] for i in ids),
            "in_sample": mean(in_sample[i] for i in ids),
        }
    return {"grid_size": len(candidates), "folds": FOLDS, "fold_choices": chosen, "chosen": asdict(final)} | {
        "summary": by_type,
        "per_query_held_out": held_out,
    }
