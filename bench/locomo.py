"""Retrieval quality on LoCoMo (SPEC "Retrieval quality", issue 28 item 1): every dialogue turn stored through
`remember` as `"{speaker} ({date}): {text}"`, every question with evidence asked through `recall`, and evidence-turn
recall@5/@10 counted overall and per category. In the same run, over the same stored turns (their content and
vectors read back from the store), the plain-script references are computed beside Memento:

- BM25:     rank_bm25's BM25Okapi (k1 1.5, b 0.75, its idf floor epsilon 0.25) over the stored texts; tokenizer:
            lowercase, `\\w+` tokens, NLTK's English stopword list (written out below) removed, on both sides;
- e5:       multilingual-e5-small as Memento runs it: each turn's stored vector in the active profile (the embedder
            worker's "document" embedding of the content), the question embedded by the embedder's /v1/embeddings
            with input_type "query" in that profile, exact cosine over every turn (no index);
- RRF:      BM25 and e5 fused by reciprocal rank, score = sum 1 / (10 + rank) over the two full rankings;
- Memento:  `recall {text}` as agents use it, and `recall {keywords}` with the question's own keywords (extracted the
            way `remember` extracts them).

Leave-one-conversation-out: every method is a `Method` with `tune(train_conversations) -> params` and
`score(conversation, params) -> per-question rows`; `folds()` tunes on four conversations and scores the fifth, and
the mean of the held-out folds is the figure to report. Memento's tunable part is recall.relevance's settings
(RECALL_*): after storing, the system is restarted once per entry of VARIANTS over the same data dir and every
question asked again, so `Question.rankings` holds one `recall` ranking per setting; the `memento` method picks, on
the four training conversations only, the TUNING candidate with the best recall@10 and scores the held-out one with
it. The other variants are the ablation (each step off). The gathered rankings are saved (a pickle under
bench/results/, not committed) so `--from-gathered FILE` can score them again without a system.

The data is read from ../shared/data/locomo-dev.json (five of the ten conversations; never copied into the repo).

    python -m bench.locomo --folds              # starts the system like `make run`; all five conversations
    python -m bench.locomo --conversations 1    # a quick check on the first one (README left alone)
    python -m bench.locomo --variants shipped,before   # only these settings
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pickle
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

import asyncpg
import httpx
import numpy as np
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from pgvector.asyncpg import register_vector
from rank_bm25 import BM25Okapi

from bench import ab
from bench.ab import OFF
from bench.report import RESULTS, ROOT, replace_readme_block
from bench.run import System
from memento_memory_api.settings import MemoryApiSettings
from memento_shared.text.keywords import extract_keywords

DATA = ROOT.parent / "shared" / "data" / "locomo-dev.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
RRF_K = 10
# SPEC "Retrieval quality": plain scripts on all ten conversations, not this run; printed only as a footnote
MEASURED_ELSEWHERE = {"BM25": 0.58, "multilingual-e5-small": 0.49, "all-MiniLM-L6-v2": 0.43, "BM25 + e5 RRF": 0.62}
# NLTK's English stopword list (nltk.corpus.stopwords.words("english"), 179 words), as a plain script would use it
STOPWORDS = frozenset(
    """i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves he him his
    himself she she's her hers herself it it's its itself they them their theirs themselves what which who whom this
    that that'll these those am is are was were be been being have has had having do does did doing a an the and but
    if or because as until while of at by for with about against between into through during before after above below
    to from up down in out on off over under again further then once here there when where why how all any both each
    few more most other some such no nor not only own same so than too very s t can will just don don't should
    should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn hasn't
    haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn shouldn't wasn wasn't
    weren weren't won won't wouldn wouldn't""".split()
)
TOKEN = re.compile(r"\w+")
TOKENIZER = "lowercase, `\\w+` tokens, NLTK's English stopwords (179 words) removed"


def tokenize(text: str) -> list[str]:
    return [t for t in TOKEN.findall(text.lower()) if t not in STOPWORDS]


def turns(conversation: dict) -> list[dict]:
    out = []
    for key, value in conversation.items():
        if key.startswith("session_") and isinstance(value, list):
            date = conversation.get(f"{key}_date_time", "")
            for turn in value:
                out.append(
                    {
                        "dia_id": turn["dia_id"],
                        "session": key,
                        "date": date,
                        "content": f"{turn['speaker']} ({date}): {turn['text']}",
                    }
                )
    return out


# --- what a run gathers: one Conversation per LoCoMo sample --------------------------------------------------------


@dataclass
class Question:
    text: str
    category: int
    evidence: list[str]
    vector: np.ndarray  # the e5 query vector (unit length)
    rankings: dict[str, list[str]] = field(default_factory=dict)  # lists gathered from the service, as dia ids


@dataclass
class Conversation:
    sample_id: str
    dia_ids: list[str]  # the stored turns, in conversation order
    texts: list[str]  # their content as stored
    vectors: np.ndarray  # their stored vectors (unit length), one row a turn
    questions: list[Question]
    _bm25: BM25Okapi | None = None

    def bm25(self) -> BM25Okapi:
        if self._bm25 is None:
            self._bm25 = BM25Okapi([tokenize(t) for t in self.texts])
        return self._bm25


# --- methods: tune(train) -> params, score(conversation, params) -> rows ------------------------------------------


def recall_at(ranked: list[str], evidence: list[str], k: int) -> float:
    top = set(ranked[:k])
    return sum(1 for e in evidence if e in top) / len(evidence)


def rows_for(conversation: Conversation, rankings: list[list[str]]) -> list[dict]:
    """Per-question rows of one method on one conversation, from one ranking (dia ids) per question."""
    return [
        {
            "conversation": conversation.sample_id,
            "category": q.category,
            "r5": recall_at(ranked, q.evidence, 5),
            "r10": recall_at(ranked, q.evidence, 10),
        }
        for q, ranked in zip(conversation.questions, rankings, strict=True)
    ]


def bm25_ranking(conversation: Conversation, question: Question) -> list[str]:
    scores = conversation.bm25().get_scores(tokenize(question.text))
    return [conversation.dia_ids[i] for i in np.argsort(-scores, kind="stable")]  # ties: conversation order


def e5_ranking(conversation: Conversation, question: Question) -> list[str]:
    scores = conversation.vectors @ question.vector
    return [conversation.dia_ids[i] for i in np.argsort(-scores, kind="stable")]


def rrf(lists: list[list[str]], k: float) -> list[str]:
    scores: dict[str, float] = defaultdict(float)
    for ranked in lists:
        for rank, key in enumerate(ranked, 1):
            scores[key] += 1 / (k + rank)
    return sorted(scores, key=lambda key: -scores[key])  # stable: ties keep the first list's order


def no_params(train: list[Conversation]) -> dict:
    return {}


@dataclass(frozen=True)
class Method:
    name: str
    label: str
    score: Callable[[Conversation, dict], list[dict]]
    tune: Callable[[list[Conversation]], dict] = no_params

    @property
    def tunable(self) -> bool:
        return self.tune is not no_params


def ranked_by(fn: Callable[[Conversation, Question], list[str]]) -> Callable[[Conversation, dict], list[dict]]:
    return lambda c, params: rows_for(c, [fn(c, q) for q in c.questions])


def gathered(name: str) -> Callable[[Conversation, dict], list[dict]]:
    return lambda c, params: rows_for(c, [q.rankings[name] for q in c.questions])


# recall.relevance's settings (issue 28), each asked over the same stored turns by restarting the system with them.
# "shipped" is the defaults; the others turn one step off (the ablation) or try another value (what the folds choose
# among, TUNING). Nothing here is tuned on a held-out conversation: `tuned_recall` picks on the training folds only.
# the first settings this order shipped with (a12c1a7); every variant but "shipped" is them with the change it names,
# so a variant means the same whatever the defaults are now
# (issue 53's steps off in them too, so issue 28's rows mean what they meant)
ISSUE_53_OFF = {
    "RECALL_STEMS": "false",
    "RECALL_ANSWER_LIFT": "0",
    "RECALL_QUESTION_DISCOUNT": "0",
    "RECALL_ROUNDS": "0",
    "RECALL_HOP": "0",
    "RECALL_RELATION": "0",
}
FIRST = {"RECALL_CONTEXT_WEIGHT": "1", "RECALL_LIFT": "0.7", "RECALL_TIME_BOOST": "0.3", **ISSUE_53_OFF}
SHIPPED = {f.alias: str(f.default) for f in MemoryApiSettings.model_fields.values() if f.alias in FIRST}
VARIANTS: dict[str, tuple[str, dict[str, str]]] = {
    "shipped": ("the defaults (RECALL_* unset)", {}),
    "first": ("the first settings: context weight 1, lift 0.7, time boost 0.3", {}),
    "before": ("every step of issue 28's order off (plain RRF of the engine's lists)", OFF),
    "no_context": ("without the context list (neighbours' words)", {"RECALL_CONTEXT_WEIGHT": "0"}),
    "no_lift": ("without the neighbour lift", {"RECALL_LIFT": "0"}),
    "no_time": ("without the time boost", {"RECALL_TIME_BOOST": "0"}),
    "no_neighbours": ("context list of own words only, no lift", {"RECALL_NEIGHBOUR_WINDOW": "0"}),
    "context_0.5": ("context weight 0.5", {"RECALL_CONTEXT_WEIGHT": "0.5"}),
    "context_2": ("context weight 2", {"RECALL_CONTEXT_WEIGHT": "2"}),
    "share_0.3": ("neighbour share 0.3", {"RECALL_NEIGHBOUR_SHARE": "0.3"}),
    "share_0.8": ("neighbour share 0.8", {"RECALL_NEIGHBOUR_SHARE": "0.8"}),
    "lift_0.5": ("lift 0.5", {"RECALL_LIFT": "0.5"}),
    "lift_0.85": ("lift 0.85", {"RECALL_LIFT": "0.85"}),
    "time_0.6": ("time boost 0.6", {"RECALL_TIME_BOOST": "0.6"}),
    "decompose_0.5": (
        "multi-part questions split, each part's words a list of weight 0.5",
        {"RECALL_DECOMPOSE": "0.5"},
    ),
    "candidates_15": ("neighbours read for the first 15 candidates", {"RECALL_CONTEXT_CANDIDATES": "15"}),
    "window_1": ("one neighbour read on each side", {"RECALL_NEIGHBOUR_WINDOW": "1"}),
    "lift_0.5_context_2": ("lift 0.5, context weight 2", {"RECALL_LIFT": "0.5", "RECALL_CONTEXT_WEIGHT": "2"}),
    "lift_0.5_time_0.6": ("lift 0.5, time boost 0.6", {"RECALL_LIFT": "0.5", "RECALL_TIME_BOOST": "0.6"}),
    "lift_0.5_top_3": ("lift 0.5 from the best 3", {"RECALL_LIFT": "0.5", "RECALL_LIFT_TOP": "3"}),
    "lift_0.5_context_2_time_0.6": (
        "lift 0.5, context weight 2, time boost 0.6",
        {"RECALL_LIFT": "0.5", "RECALL_CONTEXT_WEIGHT": "2", "RECALL_TIME_BOOST": "0.6"},
    ),
    "lift_0.5_context_2_time_0.6_candidates_15": (
        "lift 0.5, context weight 2, time boost 0.6, neighbours of the first 15",
        {
            "RECALL_LIFT": "0.5",
            "RECALL_CONTEXT_WEIGHT": "2",
            "RECALL_TIME_BOOST": "0.6",
            "RECALL_CONTEXT_CANDIDATES": "15",
        },
    ),
    "decompose_1": ("multi-part questions split, each part's words a list of weight 1", {"RECALL_DECOMPOSE": "1"}),
    # issue 53: the defaults with one step changed (not the first settings; FROM_DEFAULTS)
    "issue28": (
        "issue 28's defaults: no stems, answer lift, question discount, rounds, hop or before/after order",
        ISSUE_53_OFF,
    ),
    "no_rounds": ("the defaults without the rounds list", {"RECALL_ROUNDS": "0"}),
    "rounds_0.5": ("the defaults with the rounds list at weight 0.5", {"RECALL_ROUNDS": "0.5"}),
    "no_context_floor": ("the defaults without the context floor", {"RECALL_CONTEXT_FLOOR": "0"}),
    "no_hop": ("the defaults without the second hop", {"RECALL_HOP": "0"}),
    "no_hop_word_kinds": (
        "the defaults, the second hop asking for places and named things only (not activities, events...)",
        {"RECALL_HOP_WORD_KINDS": "false"},
    ),
    "hop_rows_200": ("the defaults, the second hop reading 200 rows (before)", {"RECALL_HOP_ROWS": "200"}),
    "no_relation": (
        "the defaults without before/after questions ordered by the anchor's time",
        {"RECALL_RELATION": "0"},
    ),
    "relation_0.6": ("the defaults, before/after questions ordered at 0.6", {"RECALL_RELATION": "0.6"}),
    "hop_6": ("the defaults with the second hop at weight 6", {"RECALL_HOP": "6"}),
    "hop_12": ("the defaults with the second hop at weight 12", {"RECALL_HOP": "12"}),
    "no_stems": ("the defaults without stems (words compared as written)", {"RECALL_STEMS": "false"}),
    "no_answer_lift": ("the defaults without the answer lift", {"RECALL_ANSWER_LIFT": "0"}),
    "no_question_discount": ("the defaults without the question discount", {"RECALL_QUESTION_DISCOUNT": "0"}),
    "answer_lift_0.7": ("the defaults with answer lift 0.7", {"RECALL_ANSWER_LIFT": "0.7"}),
    "question_discount_0.35": ("the defaults with question discount 0.35", {"RECALL_QUESTION_DISCOUNT": "0.35"}),
    "defaults_no_context": ("the defaults without the context list", {"RECALL_CONTEXT_WEIGHT": "0"}),
    "defaults_no_lift": ("the defaults without the neighbour lift", {"RECALL_LIFT": "0"}),
    "defaults_no_time": ("the defaults without the time boost", {"RECALL_TIME_BOOST": "0"}),
    "defaults_decompose_0.5": ("the defaults with multi-part questions split, weight 0.5", {"RECALL_DECOMPOSE": "0.5"}),
    # issue 46: the question's text the model reads, bounded tighter than the shipped 32 tokens (which leave every
    # LoCoMo question whole); the shipped order otherwise (its settings written out over FIRST)
    "question_24": (
        "the shipped order, the question embedded within 24 tokens",
        {**SHIPPED, "QUERY_EMBED_MAX_TOKENS": "24"},
    ),
    "question_16": (
        "the shipped order, the question embedded within 16 tokens",
        {**SHIPPED, "QUERY_EMBED_MAX_TOKENS": "16"},
    ),
}
# variants that change the defaults rather than the first settings
_DEFAULTS_CHANGED = ("issue28", "no_stems", "no_answer", "no_question", "no_rounds", "no_context_floor", "answer_lift",
                     "question_discount", "rounds_", "defaults_", "no_hop", "hop_",
                     "no_relation", "relation_")  # fmt: skip
FROM_DEFAULTS = {v for v in VARIANTS if v.startswith(_DEFAULTS_CHANGED)}
TUNING = ["shipped", "first", "context_0.5", "context_2", "share_0.3", "share_0.8", "lift_0.5", "lift_0.85", "time_0.6",
          "decompose_0.5", "decompose_1", "candidates_15", "window_1", "lift_0.5_context_2", "lift_0.5_time_0.6",
          "lift_0.5_top_3", "lift_0.5_context_2_time_0.6", "lift_0.5_context_2_time_0.6_candidates_15", "issue28",
          "answer_lift_0.7", "question_discount_0.35", "rounds_0.5", "defaults_decompose_0.5", "hop_6",
          "hop_12", "hop_rows_200", "relation_0.6"]  # fmt: skip


def environment(variant: str) -> dict[str, str]:
    """The RECALL_* settings a variant is asked with."""
    if variant == "shipped":
        return {}
    return dict(VARIANTS[variant][1]) if variant in FROM_DEFAULTS else {**FIRST, **VARIANTS[variant][1]}


def ranking_name(variant: str) -> str:
    return "text" if variant == "shipped" else f"text:{variant}"


def mean_r10(rows: list[dict]) -> float:
    return mean([r["r10"] for r in rows])


def tuned_recall(train: list[Conversation]) -> dict:
    """The candidate setting with the best recall@10 over the training conversations' questions among those above the
    plain RRF reference in every category there (all candidates, when none is)."""
    candidates = [v for v in TUNING if all(ranking_name(v) in q.rankings for c in train for q in c.questions)]
    if not train or len(candidates) < 2:
        return {"variant": "shipped"}
    reference = by_category([r for c in train for r in METHODS_BY_NAME["rrf"].score(c, {})])
    scored = {v: [r for c in train for r in gathered(ranking_name(v))(c, {})] for v in candidates}
    above = [v for v in candidates if all(by_category(scored[v])[k] > reference[k] for k in reference)]
    best = max(above or candidates, key=lambda v: (mean_r10(scored[v]), v == "shipped"))
    return {"variant": best, "above_reference_in_every_category_on_training": bool(above)}


def by_category(rows: list[dict]) -> dict:
    groups: dict = defaultdict(list)
    for r in rows:
        groups[r["category"]].append(r["r10"])
    return {k: mean(v) for k, v in groups.items()}


def tuned_score(conversation: Conversation, params: dict) -> list[dict]:
    return gathered(ranking_name(params.get("variant", "shipped")))(conversation, params)


METHODS = [
    Method("bm25", "BM25", ranked_by(bm25_ranking)),
    Method("e5", "e5 dense", ranked_by(e5_ranking)),
    Method(
        "rrf",
        f"BM25 + e5 RRF (k = {RRF_K})",
        ranked_by(lambda c, q: rrf([bm25_ranking(c, q), e5_ranking(c, q)], RRF_K)),
    ),
    Method("memento", "Memento `recall {text}` (setting chosen on the training folds)", tuned_score, tuned_recall),
    Method("memento_keywords", "Memento `recall {keywords}`", gathered("keywords")),
]
METHODS_BY_NAME = {m.name: m for m in METHODS}
ABLATION = [
    Method(f"memento_{v}", f"Memento, {label}", gathered(ranking_name(v))) for v, (label, _) in VARIANTS.items()
]
BASELINE, SUBJECT = "rrf", "memento"


# --- gathering: store through the gateway, read back, ask -----------------------------------------------------------


class Tools:
    def __init__(self, system: System, workspace: str) -> None:
        headers = {"Authorization": f"Bearer {system.secrets['access_key']}", "X-Memento-Workspace": workspace}
        self.client = Client(
            streamable_http_client(system.info["mcp_url"], http_client=create_mcp_http_client(headers=headers))
        )

    async def __aenter__(self) -> Tools:
        await self.client.__aenter__()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.client.__aexit__(*exc)

    async def call(self, name: str, arguments: dict) -> dict:
        result = await self.client.call_tool(name, arguments)
        body = json.loads(result.content[0].text)
        if result.is_error:
            raise RuntimeError(f"{name}: {body}")
        return body


async def store(system: System, items: list[dict], workspace: str) -> dict[str, str]:
    """Store every turn; returns fragment id -> dia_id."""
    by_fragment: dict[str, str] = {}

    async def worker(chunk: list[dict]) -> None:
        async with Tools(system, workspace) as tools:
            for turn in chunk:
                stored = await tools.call(
                    "remember",
                    {"content": turn["content"], "topic": turn["session"], "type": "fact", "source": turn["dia_id"]},
                )
                by_fragment.setdefault(stored["id"], turn["dia_id"])

    await asyncio.gather(*(worker(items[i::4]) for i in range(4)))
    return by_fragment


async def wait_embedded(owner_url: str, workspace: str, count: int, timeout: float = 1800) -> float:
    started = time.perf_counter()
    conn = await asyncpg.connect(owner_url)
    try:
        while True:
            done = await conn.fetchval(
                "SELECT count(*) FROM agent_memory.fragment_embeddings WHERE workspace = $1", workspace
            )
            if done >= count:
                return time.perf_counter() - started
            if time.perf_counter() - started > timeout:
                raise SystemExit(f"locomo: only {done}/{count} embedded after {timeout}s")
            await asyncio.sleep(1)
    finally:
        await conn.close()


def unit(matrix: np.ndarray) -> np.ndarray:
    return matrix / np.linalg.norm(matrix, axis=-1, keepdims=True)


async def read_back(owner_url: str, workspace: str, items: list[dict], by_fragment: dict[str, str]) -> tuple:
    """The stored turns as the store holds them: content and active-profile vector, in conversation order."""
    conn = await asyncpg.connect(owner_url)
    await register_vector(conn)
    try:
        profile = await conn.fetchval("SELECT id FROM agent_memory.embedding_profiles WHERE status = 'active'")
        rows = await conn.fetch(
            "SELECT f.id, f.content, e.embedding::real[] AS embedding FROM agent_memory.fragments f"
            " JOIN agent_memory.fragment_embeddings e"
            " ON e.fragment_id = f.id AND e.profile_id = $2 WHERE f.workspace = $1",
            workspace,
            profile,
        )
    finally:
        await conn.close()
    by_dia = {by_fragment[r["id"]]: r for r in rows if r["id"] in by_fragment}
    order = [t["dia_id"] for t in items if t["dia_id"] in by_dia]
    texts = [by_dia[d]["content"] for d in order]
    vectors = unit(np.stack([np.asarray(by_dia[d]["embedding"], dtype=np.float32) for d in order]))
    changed = sum(1 for t in items if t["dia_id"] in by_dia and by_dia[t["dia_id"]]["content"] != t["content"])
    return profile, order, texts, vectors, {"stored": len(order), "content_changed_by_store": changed}


def with_evidence(sample: dict) -> list[dict]:
    """The questions that are asked and scored: those whose evidence names dialogue turns (dia ids)."""
    return [qa for qa in sample["qa"] if any(isinstance(e, str) for e in qa.get("evidence", []))]


async def ask(system: System, sample: dict, workspace: str, by_fragment: dict[str, str], profile: str) -> list:
    questions = []
    async with Tools(system, workspace) as tools, httpx.AsyncClient(base_url=system.service_url("embedder")) as emb:
        for qa in with_evidence(sample):
            evidence = [e for e in qa["evidence"] if isinstance(e, str)]
            text = qa["question"]
            rankings: dict[str, list[str]] = {}
            started = time.perf_counter()
            found = await tools.call("recall", {"text": text, "includeLinks": False, "tokenBudget": 100000})
            LATENCY["shipped"].append(time.perf_counter() - started)
            rankings["text"] = [by_fragment.get(f["id"], "") for f in found["fragments"]]
            keywords = extract_keywords(text)
            rankings["keywords"] = []
            if keywords:
                found = await tools.call("recall", {"keywords": keywords, "includeLinks": False, "tokenBudget": 100000})
                rankings["keywords"] = [by_fragment.get(f["id"], "") for f in found["fragments"]]
            started = time.perf_counter()
            response = await emb.post(
                "/v1/embeddings", json={"input": [text], "input_type": "query", "profile": profile}, timeout=60
            )
            response.raise_for_status()
            LATENCY["query embedding (embedder HTTP)"].append(time.perf_counter() - started)
            vector = unit(np.asarray(response.json()["data"][0]["embedding"], dtype=np.float32))
            questions.append(Question(text, qa.get("category"), evidence, vector, rankings))
    return questions


async def ask_text(
    system: System, sample: dict, workspace: str, by_fragment: dict[str, str], variant: str
) -> list[list[str]]:
    """`recall {text}` for every question with evidence, in `ask`'s order: one ranking (dia ids) each."""
    out = []
    async with Tools(system, workspace) as tools:
        for qa in with_evidence(sample):
            started = time.perf_counter()
            found = await tools.call("recall", {"text": qa["question"], "includeLinks": False, "tokenBudget": 100000})
            LATENCY[variant].append(time.perf_counter() - started)
            out.append([by_fragment.get(f["id"], "") for f in found["fragments"]])
    return out


async def ask_variants(args: argparse.Namespace, data: list, conversations: list, stores: dict, variants: list) -> None:
    """Every other setting over the same stored turns: the system restarted with its environment each time."""
    for variant in variants:
        started = time.perf_counter()
        run_json = Path(args.data_dir) / "run.json"
        run_json.unlink(missing_ok=True)  # the last run's; the restart writes its own
        saved = dict(os.environ)
        os.environ.update(environment(variant))
        system = System(args)
        try:
            system.start()
            for sample, conversation in zip(data, conversations, strict=True):
                workspace = "locomo-" + sample["sample_id"]
                lists = await ask_text(system, sample, workspace, stores[workspace], variant)
                for question, ranked in zip(conversation.questions, lists, strict=True):
                    question.rankings[ranking_name(variant)] = ranked
        finally:
            system.stop()
            os.environ.clear()
            os.environ.update(saved)
        print(f"locomo: variant {variant} asked in {time.perf_counter() - started:.0f}s", flush=True)


def save_gathered(conversations: list[Conversation], timings: dict) -> None:
    saved = RESULTS / f"locomo-gathered-{time.strftime('%Y%m%d-%H%M%S')}.pickle"
    RESULTS.mkdir(parents=True, exist_ok=True)
    saved.write_bytes(pickle.dumps((conversations, timings)))
    print(f"locomo: gathered rankings saved to {saved} (not committed; --from-gathered scores them again)")


async def ask_more(args: argparse.Namespace, conversations: list[Conversation], variants: list[str]) -> None:
    """Ask more settings over a kept gathering's data dir (--from-gathered F --data-dir D --variants ...): the stored
    turns' ids are read back by their source (the dia id)."""
    data = {s["sample_id"]: s for s in json.loads(args.data.read_text())}
    samples = [data[c.sample_id] for c in conversations]
    system = System(args)
    (Path(args.data_dir) / "run.json").unlink(missing_ok=True)
    system.start()
    try:
        conn = await asyncpg.connect(system.owner_url())
        try:
            rows = await conn.fetch("SELECT id, source FROM agent_memory.fragments WHERE workspace LIKE 'locomo-%'")
        finally:
            await conn.close()
    finally:
        system.stop()
    stores = {"locomo-" + s["sample_id"]: {r["id"]: r["source"] for r in rows} for s in samples}
    await ask_variants(args, samples, conversations, stores, variants)


async def gather(args: argparse.Namespace) -> tuple[list[Conversation], dict]:
    if not args.data_dir:
        args.data_dir = tempfile.mkdtemp(prefix="memento-locomo-")
    system = System(args)
    system.start()
    data = json.loads(args.data.read_text())[: args.conversations]
    stores: dict[str, dict[str, str]] = {}
    try:
        owner = system.owner_url()
        conversations, timings = [], {}
        for sample in data:
            workspace = "locomo-" + sample["sample_id"]
            items = turns(sample["conversation"])
            started = time.perf_counter()
            by_fragment = stores[workspace] = await store(system, items, workspace)
            stored = time.perf_counter() - started
            waited = await wait_embedded(owner, workspace, len(by_fragment))
            profile, order, texts, vectors, check = await read_back(owner, workspace, items, by_fragment)
            started = time.perf_counter()
            questions = await ask(system, sample, workspace, by_fragment, profile)
            conversations.append(Conversation(sample["sample_id"], order, texts, vectors, questions))
            timings[sample["sample_id"]] = {
                "turns": len(items),
                **check,
                "questions": len(questions),
                "profile": profile,
                "store_s": round(stored, 1),
                "embed_wait_s": round(waited, 1),
                "ask_s": round(time.perf_counter() - started, 1),
            }
            print(
                f"locomo: {sample['sample_id']}: {len(by_fragment)} turns stored in {stored:.0f}s, embedded "
                f"{waited:.0f}s later; {len(questions)} questions asked",
                flush=True,
            )
    finally:
        system.stop()
    await ask_variants(args, data, conversations, stores, [v for v in args.variants if v != "shipped"])
    timings["latency"] = latency_summary()
    if args.latency_rounds:
        timings["latency_ab"] = await latency_ab(args, data)
    return conversations, timings


async def latency_ab(args: argparse.Namespace, data: list[dict]) -> dict:
    """Recall by text with the shipped order against plain fusion, alternating on the stored turns (bench.ab): the
    latency rows printed beside the quality figures. The gathering's own timings ran one setting after another."""
    (Path(args.data_dir) / "run.json").unlink(missing_ok=True)
    system = System(args)
    system.start()
    try:
        asked = [("locomo-" + s["sample_id"], qa["question"]) for s in data for qa in with_evidence(s)]
        async with ab.apps_on(system) as apps:
            return await ab.alternate(apps, system, asked, args.latency_rounds, warmup=30)
    finally:
        system.stop()


# --- scoring ---------------------------------------------------------------------------------------------------------


# seconds per call while gathering, by variant (recall {text} through the gateway, one client) and the query embedding
# at the embedder: the same store and questions, run one after another (not interleaved), so read ratios loosely
LATENCY: dict[str, list[float]] = defaultdict(list)


def latency_summary() -> dict:
    return {
        name: {
            "calls": len(v),
            "p50_ms": 1000 * float(np.percentile(v, 50)),
            "p95_ms": 1000 * float(np.percentile(v, 95)),
        }
        for name, v in LATENCY.items()
        if v
    }


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def summarise(rows: list[dict]) -> dict:
    by_cat = defaultdict(list)
    for r in rows:
        by_cat[r["category"]].append(r)
    return {
        "questions": len(rows),
        "recall@5": mean([r["r5"] for r in rows]),
        "recall@10": mean([r["r10"] for r in rows]),
        "by_category": {
            CATEGORIES.get(c, str(c)): {
                "n": len(v),
                "recall@5": mean([r["r5"] for r in v]),
                "recall@10": mean([r["r10"] for r in v]),
            }
            for c, v in sorted(by_cat.items())
        },
    }


def difference(a: dict, b: dict) -> dict:
    """a − b of two summaries, overall and per category."""
    return {
        "recall@5": a["recall@5"] - b["recall@5"],
        "recall@10": a["recall@10"] - b["recall@10"],
        "by_category": {
            c: {m: a["by_category"][c][m] - b["by_category"][c][m] for m in ("recall@5", "recall@10")}
            for c in a["by_category"]
        },
    }


def folds(conversations: list[Conversation], methods: list[Method]) -> dict:
    """Leave one conversation out: each method tuned on the others, scored on it; the mean of the held-out folds."""
    out: dict = {"held_out": {}, "mean": {}}
    for held in conversations:
        train = [c for c in conversations if c is not held]
        fold = out["held_out"][held.sample_id] = {"questions": len(held.questions)}
        for m in methods:
            params = m.tune(train)
            rows = m.score(held, params)
            fold[m.name] = {
                "params": params,
                "recall@5": mean([r["r5"] for r in rows]),
                "recall@10": mean([r["r10"] for r in rows]),
            }
    pooled: dict = defaultdict(list)  # every held-out question's row, per method
    for held in conversations:
        for m in (x for x in methods if x.name in (SUBJECT, BASELINE)):
            pooled[m.name] += m.score(held, out["held_out"][held.sample_id][m.name]["params"])
    out["held_out_by_category"] = {
        name: {CATEGORIES.get(k, str(k)): v for k, v in sorted(by_category(rows).items())}
        for name, rows in pooled.items()
    }
    for m in methods:
        per = [f[m.name] for f in out["held_out"].values()]
        out["mean"][m.name] = {
            "tunable": m.tunable,
            "recall@5": mean([p["recall@5"] for p in per]),
            "recall@10": mean([p["recall@10"] for p in per]),
        }
    return out


def rounded(value):
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    return value


def evaluate(conversations: list[Conversation], methods: list[Method]) -> dict:
    rows = {m.name: [r for c in conversations for r in m.score(c, {})] for m in methods}
    summary = {name: summarise(r) for name, r in rows.items()}
    return {
        "summary": summary,
        "difference": {f"{SUBJECT} - {BASELINE}": difference(summary[SUBJECT], summary[BASELINE])},
        "folds": folds(conversations, methods),
        "per_question": [
            {
                "conversation": q["conversation"],
                "category": q["category"],
                **{m: [rows[m][i]["r5"], rows[m][i]["r10"]] for m in rows},
            }
            for i, q in enumerate(rows[SUBJECT])
        ],
    }


# --- output ----------------------------------------------------------------------------------------------------------


def signed(x: float) -> str:
    return f"{x:+.3f}"


def fmt(x: float) -> str:
    return f"{x:.3f}"


def markdown(results: dict, methods: list[Method], show_folds: bool) -> str:
    summary, diff, fold = results["summary"], results["difference"][f"{SUBJECT} - {BASELINE}"], results["folds"]
    cats = list(summary[SUBJECT]["by_category"])
    n_conv = len(fold["held_out"])
    label = {m.name: m.label for m in methods}
    lines = [
        f"LoCoMo evidence recall, {summary[SUBJECT]['questions']} questions over {n_conv} conversation(s) of "
        f"`../shared/data/locomo-dev.json`, every method in the same run over the same stored turns. Produced by "
        f"`{results['command']}` (`bench/results/{results['file']}`). BM25: rank_bm25 Okapi (k1 1.5, b 0.75), "
        f"{TOKENIZER}; e5: multilingual-e5-small, the stored vectors and the embedder's query vector, exact cosine; "
        f'RRF: 1 / ({RRF_K} + rank) over both full rankings (bench/README.md, "LoCoMo: the same-run references").',
        "",
        "| method | recall@5 | recall@10 | " + " | ".join(f"{c} @10" for c in cats) + " |",
        "|---|---|---|" + "---|" * len(cats),
    ]
    for m in methods:
        s = summary[m.name]
        lines.append(
            f"| {m.label} | {fmt(s['recall@5'])} | {fmt(s['recall@10'])} | "
            + " | ".join(fmt(s["by_category"][c]["recall@10"]) for c in cats)
            + " |"
        )
    lines.append(
        f"| **Memento − RRF** | {signed(diff['recall@5'])} | {signed(diff['recall@10'])} | "
        + " | ".join(signed(diff["by_category"][c]["recall@10"]) for c in cats)
        + " |"
    )
    lines.append("")
    lines.append(
        "Questions per category: "
        + ", ".join(f"{c} {summary[SUBJECT]['by_category'][c]['n']}" for c in cats)
        + ". Memento − RRF at recall@5 per category: "
        + ", ".join(f"{c} {signed(diff['by_category'][c]['recall@5'])}" for c in cats)
        + "."
    )
    fm = fold["mean"]
    tuned = [m.label for m in methods if m.tunable]
    lines += [
        "",
        f"Leave-one-conversation-out ({n_conv} fold{'s' if n_conv != 1 else ''}: tune on the others, score the "
        f"held-out one), mean of the "
        f"held-out folds, recall@10: Memento {fmt(fm[SUBJECT]['recall@10'])}, RRF {fmt(fm[BASELINE]['recall@10'])}, "
        f"Memento − RRF {signed(fm[SUBJECT]['recall@10'] - fm[BASELINE]['recall@10'])} (recall@5: "
        f"{fmt(fm[SUBJECT]['recall@5'])}, {fmt(fm[BASELINE]['recall@5'])}, "
        f"{signed(fm[SUBJECT]['recall@5'] - fm[BASELINE]['recall@5'])}). "
        + (
            "Tuned on the training folds: " + ", ".join(tuned) + "."
            if tuned
            else "No method has a tuned parameter yet, so the held-out mean is each method's mean over the "
            "conversations (every conversation weighted alike; the table above pools the questions)."
        ),
    ]
    held_cat = fold.get("held_out_by_category", {})
    if SUBJECT in held_cat and BASELINE in held_cat:
        lines += [
            "",
            "Held out per category (every held-out question pooled, Memento with each fold's chosen setting), "
            "recall@10 Memento / RRF: "
            + ", ".join(
                f"{c} {fmt(held_cat[SUBJECT][c])} / {fmt(held_cat[BASELINE][c])} "
                f"({signed(held_cat[SUBJECT][c] - held_cat[BASELINE][c])})"
                for c in held_cat[SUBJECT]
            )
            + ". Settings the folds chose: "
            + ", ".join(f"{sid} {f[SUBJECT]['params'].get('variant')}" for sid, f in fold["held_out"].items())
            + ".",
        ]
    if show_folds:
        lines += [
            "",
            "| held-out conversation | questions | "
            + " | ".join(label[m.name] for m in methods)
            + " | Memento − RRF |",
            "|---|---|" + "---|" * (len(methods) + 1),
        ]
        for sid, f in fold["held_out"].items():
            lines.append(
                f"| {sid} | {f['questions']} | "
                + " | ".join(f"{fmt(f[m.name]['recall@5'])} / {fmt(f[m.name]['recall@10'])}" for m in methods)
                + f" | {signed(f[SUBJECT]['recall@5'] - f[BASELINE]['recall@5'])} / "
                f"{signed(f[SUBJECT]['recall@10'] - f[BASELINE]['recall@10'])} |"
            )
        lines.append(
            "| **mean of held-out folds** | | "
            + " | ".join(f"{fmt(fm[m.name]['recall@5'])} / {fmt(fm[m.name]['recall@10'])}" for m in methods)
            + f" | {signed(fm[SUBJECT]['recall@5'] - fm[BASELINE]['recall@5'])} / "
            f"{signed(fm[SUBJECT]['recall@10'] - fm[BASELINE]['recall@10'])} |"
        )
        lines += [
            "",
            "Cells are recall@5 / recall@10 of the held-out conversation. Tuned on the other folds: "
            + (", ".join(m.label for m in methods if m.tunable) or "nothing")
            + "; "
            + ", ".join(m.label for m in methods if not m.tunable)
            + " have no parameters (`tune` returns {}), so their fold is their score on that conversation and their "
            "held-out mean equals their per-conversation mean.",
        ]
    measured = results.get("timings", {}).get("latency_ab")
    latency = results.get("timings", {}).get("latency", {})
    if measured:
        lines += [
            "",
            f"Recall by text on these stored turns, the shipped order against plain fusion (every step of issue 28's "
            f"order off), measured alternating after the gathering (bench.ab: {measured['questions']} questions x "
            f"{measured['rounds']}, A B B A per question, memory-api in-process, query-embedding cache emptied before "
            "each call):",
            "",
            *ab.describe(measured),
        ]
    elif latency:
        lines += [
            "",
            "Latency while gathering (one client through the gateway, p50 / p95 ms; the settings ran one after "
            "another on the same store, not interleaved): "
            + "; ".join(f"{name} {v['p50_ms']:.1f} / {v['p95_ms']:.1f}" for name, v in latency.items())
            + ".",
        ]
    lines += [
        "",
        "Measured elsewhere, not in this run (SPEC, plain scripts on all ten conversations, recall@10): "
        + ", ".join(f"{k} {v}" for k, v in MEASURED_ELSEWHERE.items())
        + ".",
    ]
    return "\n".join(lines)


def git_state() -> dict:
    def run(*cmd: str) -> str:
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True).stdout.strip()

    return {"commit": run("git", "rev-parse", "HEAD"), "uncommitted": run("git", "status", "--porcelain").splitlines()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=5, help="the first N conversations (default all five)")
    parser.add_argument("--folds", action="store_true", help="print each held-out conversation's figures too")
    parser.add_argument("--data", type=Path, default=DATA, help="LoCoMo JSON (default ../shared/data/locomo-dev.json)")
    parser.add_argument("--data-dir")
    parser.add_argument("--port", type=int, default=56433)
    parser.add_argument("--url")
    parser.add_argument(
        "--no-readme", action="store_true", help="leave docs/benchmarks.md alone (implied below 5 conversations)"
    )
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help=f"relevance settings to ask (default all: {','.join(VARIANTS)})"
    )
    parser.add_argument("--from-gathered", type=Path, help="score a saved gathering again (no system)")
    parser.add_argument(
        "--latency-rounds", type=int, default=1, help="rounds of the alternating latency comparison (0: none)"
    )
    args = parser.parse_args()
    args.variants = [v for v in args.variants.split(",") if v]
    unknown = set(args.variants) - set(VARIANTS)
    if unknown:
        raise SystemExit(f"locomo: unknown variants {sorted(unknown)}; known: {', '.join(VARIANTS)}")
    args.key = None
    if args.url:
        raise SystemExit("locomo: reads the store back as its owner, so it starts its own system (no --url)")
    command = " ".join(["python -m bench.locomo", *sys.argv[1:]])
    started = time.time()
    if args.from_gathered:
        conversations, timings = pickle.loads(args.from_gathered.read_bytes())
        missing = [
            v for v in args.variants if any(ranking_name(v) not in q.rankings for q in conversations[0].questions)
        ]
        if missing and args.data_dir and "--variants" in sys.argv:
            # settings not asked yet, over the stored turns the gathering kept in its data dir
            asyncio.run(ask_more(args, conversations, missing))
            timings["latency"] = {**timings.get("latency", {}), **latency_summary()}
            save_gathered(conversations, timings)
    else:
        conversations, timings = asyncio.run(gather(args))
        save_gathered(conversations, timings)
    asked = {v for v in VARIANTS if all(ranking_name(v) in q.rankings for c in conversations for q in c.questions)}
    methods = METHODS + [m for m in ABLATION if m.name.removeprefix("memento_") in asked]
    results = {
        "command": command,
        "file": f"locomo-{time.strftime('%Y%m%d-%H%M%S')}.json",
        "git": git_state(),
        "config": {
            "bm25": f"rank_bm25 {version('rank_bm25')} BM25Okapi, k1 1.5, b 0.75, epsilon 0.25",
            "tokenizer": TOKENIZER,
            "e5": "the active profile's stored vectors; query: embedder /v1/embeddings input_type query; exact cosine",
            "rrf_k": RRF_K,
            "methods": {m.name: m.label for m in methods},
            "variants": {v: environment(v) for v in asked},
            "tuning_candidates": TUNING,
        },
        **evaluate(conversations, methods),
        "timings": timings,
        "wall_s": round(time.time() - started, 1),
    }
    table = markdown(results, methods, args.folds)  # from the unrounded figures; the JSON keeps three decimals
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / results["file"]).write_text(json.dumps(rounded(results), indent=2) + "\n")
    print("\n" + table)
    if not args.no_readme and args.conversations >= 5:
        replace_readme_block("locomo", table)


if __name__ == "__main__":
    main()
