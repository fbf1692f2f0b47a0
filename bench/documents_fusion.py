"""memory.search's fusion weights, chosen on labelled queries and scored on queries the choice never saw.

bench.documents ranks every query's three lists once; this module then fuses those same lists under each weighting
of a grid (memory-api's own `fuse`), in memory. The queries are split into five folds by the document of their
first answer (so two questions about one section never sit on both sides), and for each fold the weighting best on
the other four (mean of recall@10 and MRR@20) is scored on it: the held-out figure is what the method of choosing
weights earns on questions it was not tuned on. The weighting best on all the queries is what memory-api ships
(settings `DOCUMENT_*`); its own all-query score is printed too, labelled as tuned in-sample.

The neighbour lift (`DOCUMENT_NEIGHBOUR_LIFT`, memory-api's `lift`) is one more axis of the grid, applied to each
fused list: the folds choose it with the weights, and each lift value is also scored held out on its own (the
weights chosen on the other folds with the lift held at that value), so the values compare on equal terms. The
chunks beside each query's listed ones are read by bench.documents (`present`), as memory.search reads them.

The canonical preference (`DOCUMENT_CANONICAL_SAME_WORDS`, memory-api's `prefer_canonical`) applies after the lift to
every candidate, with the share its seed weighting carries (`same`), reading each chunk's words from the query's
`words`; bench.documents tunes once with it off (the figures before issue 48) and once as shipped.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import asdict, replace

from memento_memory_api.recall.documents import Weights, fuse, lift, prefer_canonical

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


# the neighbour lift's values (of the best DOCUMENT_NEIGHBOUR_TOP chunks' scores); 0 first, so a tie keeps it off
LIFTS = (0.0, 0.3, 0.5, 0.7)
METRICS = ("recall@5", "recall@10", "mrr")


def grid(seed: Weights) -> list[Weights]:
    """Every weighting of GRID, each with every lift of LIFTS (the lifts inner)."""
    names = list(GRID)
    weightings = [replace(seed, **dict(zip(names, v, strict=True))) for v in itertools.product(*GRID.values())]
    return [replace(w, lift=value) for w in weightings for value in LIFTS]


def metrics(query: dict, ranked: list) -> dict[str, float]:
    """recall@5/@10 (share of the query's answers with a hit in the top k) and MRR@20 of one ranking of chunk keys;
    `query["hits"]` maps a chunk key to the answers it satisfies."""
    hits, answers = query["hits"], query["answers"]

    def recall(k: int) -> float:
        return len({a for key in ranked[:k] for a in hits.get(key, ())}) / answers

    first = next((n for n, key in enumerate(ranked[:DEPTH], 1) if hits.get(key)), None)
    return {"recall@5": recall(5), "recall@10": recall(10), "mrr": 1 / first if first else 0.0}


def ordered(query: dict, fused: list, weights: Weights) -> list:
    """The chunk keys of a fused list after the lift and the canonical preference, as memory.search orders them."""
    lifted = lift(fused, query["present"], weights)
    return [key for key, _ in prefer_canonical(lifted, query["canonical"], query["words"].__getitem__, weights.same)]


def ranking(query: dict, weights: Weights) -> list:
    return ordered(query, fuse(query["lists"], query["canonical"], weights, query["coverage"]), weights)


def mean(per_query: Iterable[dict[str, float]]) -> dict[str, float]:
    rows = list(per_query)
    return {m: round(sum(r[m] for r in rows) / len(rows), 3) for m in METRICS}


def scored(queries: list[dict], candidates: list[Weights]) -> dict[str, list[dict[str, float]]]:
    """Each query's metrics under every candidate (query id -> one per candidate), fusing once per weighting and
    lifting that fused list for each lift (the lift reads nothing but the fused list and the chunks present)."""
    table: dict[str, list[dict[str, float]]] = {q["id"]: [] for q in queries}
    fused: dict[str, list] = {}
    for n, weights in enumerate(candidates):
        base = replace(weights, lift=0.0)
        fresh = n == 0 or base != replace(candidates[n - 1], lift=0.0)
        for q in queries:
            if fresh:
                fused[q["id"]] = fuse(q["lists"], q["canonical"], base, q["coverage"])
            table[q["id"]].append(metrics(q, ordered(q, fused[q["id"]], weights)))
    return table


def choose(table: dict[str, list[dict[str, float]]], ids: list[str], allowed: Iterable[int]) -> int:
    """The index of the allowed candidate best on these queries (mean recall@10 + mean MRR, each to 3 places);
    ties go to the earlier one in the grid."""
    scored = []
    for n in allowed:
        scores = mean(table[i][n] for i in ids)
        scored.append((scores["recall@10"] + scores["mrr"], -n))
    return -max(scored)[1]


def folds(queries: list[dict]) -> list[list[dict]]:
    """Five folds, whole documents each (by the document of a query's first answer), dealt round-robin in the
    documents' sorted order."""
    docs = sorted({q["doc"] for q in queries})
    fold_of = {d: i % FOLDS for i, d in enumerate(docs)}
    return [[q for q in queries if fold_of[q["doc"]] == f] for f in range(FOLDS)]


def tune(queries: list[dict], seed: Weights) -> dict:
    """The held-out figures (each fold scored with the weights and lift chosen on the other four), the same with the
    lift held at each value of LIFTS, the weights and lift chosen on all the queries and their in-sample figures;
    per query type too."""
    candidates = grid(seed)
    table = scored(queries, candidates)
    everything = range(len(candidates))
    at = {value: [n for n, w in enumerate(candidates) if w.lift == value] for value in LIFTS}
    held_out: dict[str, dict[str, float]] = {}
    by_lift: dict[float, dict[str, dict[str, float]]] = {value: {} for value in LIFTS}
    chosen = []
    for fold in folds(queries):
        rest = [q["id"] for q in queries if q not in fold]
        n = choose(table, rest, everything)
        chosen.append(asdict(candidates[n]))
        held_out.update((q["id"], table[q["id"]][n]) for q in fold)
        for value, allowed in at.items():
            m = choose(table, rest, allowed)
            by_lift[value].update((q["id"], table[q["id"]][m]) for q in fold)
    final = choose(table, [q["id"] for q in queries], everything)
    in_sample = {q["id"]: table[q["id"]][final] for q in queries}
    by_type = {}
    for group in ("all", *sorted({q["type"] for q in queries})):
        ids = [q["id"] for q in queries if group in ("all", q["type"])]
        by_type[group] = {
            "held_out": mean(held_out[i] for i in ids),
            "in_sample": mean(in_sample[i] for i in ids),
            "held_out_lift": {str(value): mean(by_lift[value][i] for i in ids) for value in LIFTS},
        }
    return {
        "grid_size": len(candidates),
        "folds": FOLDS,
        "fold_choices": chosen,
        "chosen": asdict(candidates[final]),
        "summary": by_type,
        "per_query_held_out": held_out,
    }
