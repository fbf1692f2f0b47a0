"""The order of a search by text (issue 28): the engine's lists (keywords, meaning, words) fused by RRF beside a list
of what the conversation says around each candidate, then a boost for time and a lift for a strong hit's neighbours.

- context: a candidate's own words and, at `neighbour_share`, the words it lacks that its neighbours in its thread
  hold (the turns just before and after it), each weighed by how rare it is among the rows read. A reply is found by
  the words of the question asked just before it (LoCoMo's multi-hop questions). Neighbours no list found join here.
  A row's own words always weigh more than the same words around it, so a direct hit stays ahead of a row that only
  borders it. Scored (context()) while the model embeds the question, over the rows known by then; a row only the
  vector list finds is scored afterwards by its own words, weighed as among those rows.
- time: for a "when" question, a row that names a time scores `1 + time_boost` times as much; for a question naming a
  time, a row said at or about that time does.
- parts (off unless RECALL_DECOMPOSE): a question of several clauses ("... on a hike and had a bad experience") is
  searched by each clause's words too, each a list of weight `decompose`.
- lift: each of the `lift_top` best rows gives its nearest neighbours `lift` of its own score (never more than it has),
  when that is more than they have; one that asks a question (its text ends with "?") gives the next row of its
  thread, the answer, `answer_lift` of it (issue 53: "How is the new puppy doing?" is answered by "She's learning
  commands", which shares no word with a question about the puppy).
- context floor: a row whose context score is under `context_floor` x the best one's is left out of the context list
  (issue 53: in a small store, a row holding only the speaker's name took a high rank of the list).
- question discount: then a row that asks a question scores `question_discount` less: it points to its answer more
  than it holds one (a reply such as "Wow! Did you see that band?" echoes the question's words).
- before/after: for a question relating two events ("What did she do after the adoption meeting?"), the rows on the
  asked side of the anchor's time score `1 + relation` times as much, those on the wrong side `1 - relation`, below
  the `hop_keep` best rows (recall.timeline).
- stems: words are compared by their stems (text.stems; issue 53), so "camped" meets "camping"; `stems` off compares
  the words as written.

Neighbours are an ordering (fragments.thread, seq; migration 0019), read per search by one indexed statement: writers
store a conversation's turns in any order, and links per pair would be rewritten as turns arrive. A search reads the
neighbours of the lexical list's first `candidates` while the model embeds the question, off the critical path, and
scores the context list over them and the lexical side's rows then. Candidates only the vector list found get no
neighbours of their own: reading theirs after the vector list put ~0.9 ms on every search's critical path for 0.002 of
LoCoMo recall@10 (bench/README.md, "Recall by text: what the relevance order costs").
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache, partial
from typing import Any

import asyncpg

from memento_memory_api.recall import timeline
from memento_memory_api.recall.filters import Filters
from memento_memory_api.recall.fusion import rrf_scores
from memento_memory_api.repositories import fragments as repo
from memento_memory_api.uow import Scope
from memento_shared.text import dates, relations
from memento_shared.text.keywords import STOPWORDS
from memento_shared.text.relations import Relation
from memento_shared.text.stems import stem, words

_WORD = re.compile(r"[0-9A-Za-z가-힣_]+")
WEIGHT_FLOOR = 0.001  # a word every row read holds still counts a little: a lone candidate must not score 0


@dataclass(frozen=True)
class Tuning:
    k: float = 10.0  # RRF's k (engine.RRF_K)
    context_weight: float = 2.0  # the context list's weight in the fusion; 0: no context list, no neighbours read
    neighbour_share: float = 0.5  # what a word held only by a neighbour counts against the row's own
    window: int = 2  # neighbours read on each side
    candidates: int = 30  # the lexical list's first this many have their neighbours read (module docstring)
    lift: float = 0.5
    lift_top: int = 5
    time_boost: float = 0.6
    decompose: float = 0.0  # the weight of each part's lexical list (parts()); 0: questions are not split
    answer_lift: float = 0.85  # what a best row that asks a question gives the row after it (module docstring)
    question_discount: float = 0.2  # what a row that asks a question loses of its score
    rounds: float = 1.0  # the weight of the rounds list (recall.rounds); 0: none read
    context_floor: float = 0.2  # rows scoring under this share of the best are left out of the context list
    stems: bool = True  # words compared by their stems (text.stems)
    hop: float = 3.0  # the weight of the second hop's list (recall.hops); 0: none read
    hop_keep: int = 3  # the best rows before the hop keep their places (its rows go below them)
    hop_word_kinds: bool = True  # the hop asks for activities, events... too (text.links.asked)
    hop_rows: int = 400  # the rows the hop reads at most (recall.hops)
    relation: float = 0.3  # what a row on the asked side of a related event gains, on the wrong side loses (0: off)

    @classmethod
    def of(cls, settings: Any, k: float) -> Tuning:
        return cls(
            k=k,
            context_weight=settings.recall_context_weight,
            neighbour_share=settings.recall_neighbour_share,
            window=settings.recall_neighbour_window,
            candidates=settings.recall_context_candidates,
            lift=settings.recall_lift,
            lift_top=settings.recall_lift_top,
            time_boost=settings.recall_time_boost,
            decompose=settings.recall_decompose,
            answer_lift=settings.recall_answer_lift,
            question_discount=settings.recall_question_discount,
            rounds=settings.recall_rounds,
            context_floor=settings.recall_context_floor,
            stems=settings.recall_stems,
            hop=settings.recall_hop,
            hop_keep=settings.recall_hop_keep,
            hop_word_kinds=settings.recall_hop_word_kinds,
            hop_rows=settings.recall_hop_rows,
            relation=settings.recall_relation,
        )

    @property
    def reads_neighbours(self) -> bool:
        lifts = (self.lift > 0 or self.answer_lift > 0) and self.lift_top > 0
        return self.window > 0 and (self.context_weight > 0 or lifts)


@dataclass(frozen=True)
class Wanted:
    """What the question asks, as the order needs it."""

    terms: frozenset[str]
    when: bool  # a "when" question: rows that name a time are likelier answers
    periods: tuple[dates.TimeRange, ...]  # times the question names
    relation: Relation | None = None  # the two events it relates in time (text.relations), if asked
    anchor_terms: frozenset[str] = frozenset()  # the words of the relation's anchor clause


def wanted(
    text: str,
    expanded: str | None = None,
    now: datetime | None = None,
    stems: bool = True,
    asked: str | None = None,
) -> Wanted:
    """`text`'s times, and the words of `expanded` (the question with its names and dates spelled out) or of it;
    with `asked` (the question itself: `text`, or its last question when `text` is a whole turn), the two events it
    relates in time, if any (text.relations)."""
    now = now or datetime.now(UTC)
    found = dates.mentions(text, now)
    periods = tuple(m.range for m in found)
    terms = content_terms(expanded or text, stems)
    related = relations.relation(asked, found if asked == text else None) if asked else None
    anchor_terms = content_terms(related.anchor, stems) if related else frozenset()
    return Wanted(terms, dates.is_temporal_question(text), periods, related, anchor_terms)


def content_terms(text: str, stems: bool = True) -> frozenset[str]:
    """The stems (or, `stems` off, the words) of `text`'s words that are not stopwords, as the lexical search drops
    them."""
    found = (w for w in _WORD.findall(text.lower()) if len(w) > 1 and w not in STOPWORDS)
    return frozenset(map(stem, found) if stems else found)


_CLAUSES = re.compile(r",\s*(?:and|or|but)\s+|\s+(?:and|or|but)\s+|[,;]\s*|\s+(?:그리고|하고|또는)\s+", re.IGNORECASE)


def parts(text: str) -> list[str]:
    """The parts of a multi-part question (offline: split at conjunctions and commas), when at least two of them
    hold two words of their own that are not stopwords; otherwise none (the question is one part). "When did she
    meet people on a hike and have a bad experience" splits; "Mel and her kids" does not (one side has one word)."""
    pieces = [p.strip() for p in _CLAUSES.split(text) if p.strip()]
    kept = [p for p in pieces if len(content_terms(p)) >= 2]
    return kept if len(kept) >= 2 and len(kept) == len(pieces) else []


# row id -> (the texts its words were split from, those words): the same rows come back search after search, and
# splitting their words again was half the order's time. A row is looked up by its id and its texts compared (a
# cache keyed by the texts hashed every row's whole text on every search, a fifth of the order's time). The oldest
# entry goes first past WORDS_HELD: 2048 rows' words hold ~3 MB; 8192 held ~12 MB, which the soak saw as memory-api
# growing while the cache filled.
_WORDS: dict[tuple[str, bool], tuple[tuple[Any, ...], frozenset[str]]] = {}
WORDS_HELD = 2048


def row_words(row: Any, stems: bool = True) -> frozenset[str]:
    texts = (row["content"], row["topic"], row["expansion"], row["facts"])
    key = (row["id"], stems)
    known = _WORDS.get(key)
    if known is not None and known[0] == texts:
        return known[1]
    if len(_WORDS) >= WORDS_HELD:
        del _WORDS[next(iter(_WORDS))]
    split = words(" ".join(filter(None, texts)), stems)
    _WORDS[key] = (texts, split)
    return split


@dataclass(frozen=True)
class Context:
    """The context list's scores of the rows known when it was made (context()), and each of the question's words
    weighed by its rarity among them."""

    scores: dict[str, float]  # id -> score, for the rows that hold a word or border one that does
    seen: frozenset[str]  # every row it weighed, scored or not
    terms: frozenset[str]  # weight's keys, as a set to intersect a row's words with
    weight: dict[str, float]  # term -> weight
    stems: bool = True  # words compared by their stems

    def own(self, row: Any) -> float:
        """A row found afterwards (the vector list's): the words it holds itself, weighed as among the rows seen."""
        held = row_words(row, self.stems) & self.terms
        return math.fsum(map(self.weight.__getitem__, held)) if held else 0.0


def context(
    lists: Iterable[Sequence[str]],
    rows: dict[str, Any],
    neighbours: dict[str, list[str]],
    terms: frozenset[str],
    share: float,
    stems: bool = True,
) -> Context:
    """The listed rows and their neighbours (`neighbours`: id -> its neighbours' ids; all in `rows`) by the question's
    words they hold, and (at `share`) the ones only the rows beside them hold; weighed by rarity among those rows."""
    adjacent: dict[str, set[str]] = defaultdict(set)
    for i, near in neighbours.items():
        for j in near:
            adjacent[i].add(j)
            adjacent[j].add(i)
    ids = dict.fromkeys([i for r in lists for i in r if i in rows] + list(adjacent))
    held = {i: row_words(rows[i], stems) & terms for i in ids}
    count = len(held)
    frequency = Counter(t for h in held.values() for t in h)
    weight = {t: max(math.log((count + 1) / (frequency[t] + 0.5)), WEIGHT_FLOOR) for t in terms}
    scores = {}
    for i in ids:  # most rows hold none of the words, nor do their neighbours
        own, beside = held[i], adjacent.get(i)
        around = set().union(*(held[j] for j in beside)) - own if beside else ()
        if own or around:
            # fsum: exact whatever the order, and sets iterate in an order that changes with each process's string
            # hashing: with sum, rows holding the same words scored apart in the last bit and their order (ties go
            # to the lists' fused score, then the id) differed from one memory-api process to the next
            scores[i] = (math.fsum(map(weight.__getitem__, own)) if own else 0) + (
                share * math.fsum(map(weight.__getitem__, around)) if around else 0
            )
    return Context(scores, frozenset(ids), terms, weight, stems)


def order(
    ranked: Sequence[Sequence[str]],
    rows: dict[str, Any],
    neighbours: dict[str, list[str]],
    want: Wanted,
    tuning: Tuning,
    part_lists: Sequence[Sequence[str]] = (),
    known: Context | None = None,
    rounds: Sequence[str] = (),
    hops: Sequence[str] = (),
) -> list[tuple[str, float]]:
    """(id, score) best first over the ranked lists' rows and the neighbours read for them (`neighbours`: id -> its
    neighbours' ids, nearest first on either side; every id in `rows`); `part_lists`, the lexical lists of a
    multi-part question's parts, weigh `decompose` each; `known`, the context of the rows known before the vector list
    (the listed rows the context did not see are scored by their own words), else one made here of every list;
    `rounds`, the rounds list (recall.rounds), weighs `tuning.rounds`; `hops`, the second hop's list (recall.hops),
    weighs `tuning.hop`, below the `tuning.hop_keep` best rows before it."""
    lists = [[i for i in r if i in rows] for r in ranked]
    weights = [1.0] * len(lists)
    for part in part_lists:
        lists.append([i for i in part if i in rows])
        weights.append(tuning.decompose)
    if rounds and tuning.rounds > 0:
        lists.append([i for i in rounds if i in rows])
        weights.append(tuning.rounds)
    scores = rrf_scores(lists, k=tuning.k, weights=weights)
    if tuning.context_weight > 0 and want.terms:  # the context list fused beside the others
        known = known or context(lists, rows, neighbours, want.terms, tuning.neighbour_share, tuning.stems)
        ranking = context_ranking(lists, rows, known, scores, tuning.context_floor)
        for rank, i in enumerate(ranking, start=1):
            scores[i] = scores.get(i, 0.0) + tuning.context_weight / (tuning.k + rank)
    if tuning.time_boost > 0 and (want.when or want.periods):
        for i in scores:
            if _timely(rows[i], want):
                scores[i] *= 1 + tuning.time_boost
    if (tuning.lift > 0 or tuning.answer_lift > 0) and tuning.lift_top > 0 and scores:
        _lift(scores, rows, neighbours, tuning)
    if tuning.question_discount > 0:
        for i in scores:
            if asks(rows[i]):
                scores[i] *= 1 - tuning.question_discount
    if want.relation is not None and want.anchor_terms and tuning.relation > 0 and scores:
        _relate(scores, rows, want.relation, want.anchor_terms, tuning)
    if hops and tuning.hop > 0:
        _hop(scores, [i for i in hops if i in rows], tuning)
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))


def _relate(
    scores: dict[str, float], rows: dict[str, Any], relation: Relation, anchor: frozenset[str], tuning: Tuning
) -> None:
    """A question relating two events (recall.timeline), in place: the rows on the asked side of the anchor's time
    up, those on the wrong side down; the `hop_keep` best rows before it keep their places, as for the hop."""
    kept = _kept(scores, tuning)
    words = partial(row_words, stems=tuning.stems)
    if timeline.arrange(scores, rows, relation, anchor, words, tuning.relation, kept):
        hold(scores, kept)


def _kept(scores: dict[str, float], tuning: Tuning) -> set[str]:
    """The `hop_keep` best rows: what a later list or move never displaces."""
    return {i for i, _ in _best(scores, tuning.hop_keep)} if tuning.hop_keep > 0 and scores else set()


def _hop(scores: dict[str, float], hops: list[str], tuning: Tuning) -> None:
    """The second hop's list fused in place, at `hop`; the `hop_keep` best rows before it keep their places and
    scores: a row the hop lifts to their level goes just below them, in the order it reached (recall.hops)."""
    kept = _kept(scores, tuning)
    for rank, i in enumerate(hops, start=1):
        if i not in kept:
            scores[i] = scores.get(i, 0.0) + tuning.hop / (tuning.k + rank)
    hold(scores, kept)


def hold(scores: dict[str, float], kept: set[str]) -> None:
    """The `kept` rows above every other, in place: a row that reached their level goes just below the lowest of
    them, in the order it reached."""
    if kept:
        floor = min(scores[i] for i in kept)
        over = sorted((i for i in scores if i not in kept and scores[i] >= floor), key=lambda i: (-scores[i], i))
        for n, i in enumerate(over, start=1):
            scores[i] = floor * (1 - 1e-6 * n)


def _lift(scores: dict[str, float], rows: dict[str, Any], neighbours: dict[str, list[str]], tuning: Tuning) -> None:
    """The neighbour lift, in place: the rows on each side of the best rows take a share of their score (the row after
    a question the larger answer share), applied once every lift is known."""
    lifted: dict[str, float] = {}
    for hit, score in _best(scores, tuning.lift_top):
        before, after = _nearest(hit, rows, neighbours)
        answer = tuning.answer_lift if asks(rows[hit]) else 0.0
        for near, share in ((before, tuning.lift), (after, max(tuning.lift, answer))):
            if near is not None and share > 0 and score * share > lifted.get(near, 0.0):
                lifted[near] = score * share
    for near, score in lifted.items():
        if score > scores.get(near, 0.0):
            scores[near] = score


_ASKS = ("?", "？")


def asks(row: Any) -> bool:
    """The row's text asks a question (it ends with a question mark): the row after it in its thread answers it."""
    return bool(row["content"].rstrip().endswith(_ASKS))


def _best(scores: dict[str, float], n: int) -> list[tuple[str, float]]:
    """The `n` best (id, score), equal scores by id: the n-th best score found by sorting the bare floats, then only
    the rows at or above it sorted by key (a third of heapq.nsmallest's time with a key for every row)."""
    cut = sorted(scores.values(), reverse=True)[:n][-1]
    return sorted(((i, s) for i, s in scores.items() if s >= cut), key=lambda pair: (-pair[1], pair[0]))[:n]


def context_ranking(
    lists: Sequence[Sequence[str]],
    rows: dict[str, Any],
    known: Context,
    fused: dict[str, float] | None = None,
    floor: float = 0.0,
) -> list[str]:
    """The context list: `known`'s rows and the listed rows it did not see (by their own words); equal scores keep the
    order the lists' `fused` scores give them (then neighbours no list found, by id). Rows scoring under `floor` x
    the best score are left out: in a small store a row holding only a word nearly every row holds (the speaker's
    name) would otherwise take a high rank of the list, the ranks and not the scores being fused."""
    scores = dict(known.scores)
    for i in (i for r in lists for i in r if i not in known.seen):
        score = known.own(rows[i])
        if score:
            scores[i] = score
    if floor > 0 and scores:
        cut = floor * max(scores.values())
        scores = {i: score for i, score in scores.items() if score >= cut}
    fused = fused or {}
    return sorted(scores, key=lambda i: (-scores[i], -fused.get(i, 0.0), i))


def _timely(row: Any, want: Wanted) -> bool:
    if want.periods:
        start, end, said = row["event_from"], row["event_to"], row["event_said"]
        for period in want.periods:
            if start is not None and end is not None and start < period.end and period.start < end:
                return True
            if said is not None and said in period:
                return True
        return False
    return row["event_from"] is not None


def _nearest(hit: str, rows: dict[str, Any], neighbours: dict[str, list[str]]) -> tuple[str | None, str | None]:
    """The nearest neighbour before and after `hit` (None where it has none)."""
    seq = rows[hit]["seq"]
    before = [j for j in neighbours.get(hit, ()) if rows[j]["seq"] < seq or (rows[j]["seq"] == seq and j < hit)]
    after = [j for j in neighbours.get(hit, ()) if j not in before]
    return (before[0] if before else None), (after[0] if after else None)


_OPTIONAL = ("agents", "topic", "type", "tags", "narrow")  # a search's optional filters; given ones' parameters: $7...


def optional_values(agents: list[str] | None, filters: Filters) -> dict[str, Any]:
    """The optional filters' values by name (None: not given), for `filter_conditions`."""
    topic, ftype, _, tags, narrow = filters.values()
    return {"agents": agents, "topic": topic, "type": ftype, "tags": tags, "narrow": narrow}


def given_filters(agents: list[str] | None, filters: Filters) -> tuple[frozenset[str], list[Any]]:
    """The optional filters a search gives, and their values in _OPTIONAL's order (the statements' last parameters,
    as `filter_conditions` numbers them)."""
    values = optional_values(agents, filters)
    given = [name for name in _OPTIONAL if values[name] is not None]
    return frozenset(given), [values[name] for name in given]


def filter_conditions(given: frozenset[str], first: int) -> list[str]:
    """SQL conditions on fragments `f` for the optional filters `given`, in _OPTIONAL's order, their parameters
    numbered from `first`."""
    conditions: list[str] = []
    for name in (n for n in _OPTIONAL if n in given):
        p = f"${first + len(conditions)}"
        conditions.append(
            {
                "agents": f"f.agent_id = ANY({p}::text[])",
                "topic": f"f.topic = {p}::text",
                "type": f"f.type = {p}::text",
                "tags": repo.tagged("f", p),
                "narrow": repo.narrowed("f", p),
            }[name]
        )
    return conditions


@lru_cache(maxsize=128)
def neighbours_sql(given: frozenset[str], superseded: bool) -> str:
    """The neighbour statement with only the filters a search gives. Written as `($n IS NULL OR ...)` it was planned
    afresh on every call (a custom plan folds the absent filters away, so the server never settled on the generic
    one) and planning was half its time: 12 candidates 0.85 ms a call, with the absent filters left out 0.39."""
    conditions = filter_conditions(given, 7)
    where = " AND ".join([*conditions, repo.live("f", "true" if superseded else "false")])
    return f"""
SELECT c.cid AS near_of, n.* FROM unnest($1::text[], $2::text[], $3::bigint[]) AS c(cid, thread, seq)
CROSS JOIN LATERAL (
    (SELECT {repo.COLUMNS} FROM agent_memory.fragments f
     WHERE f.tenant_id = $4 AND f.workspace = $5 AND f.thread = c.thread AND (f.seq, f.id) < (c.seq, c.cid)
       AND {where} ORDER BY f.seq DESC, f.id DESC LIMIT $6)
    UNION ALL
    (SELECT {repo.COLUMNS} FROM agent_memory.fragments f
     WHERE f.tenant_id = $4 AND f.workspace = $5 AND f.thread = c.thread AND (f.seq, f.id) > (c.seq, c.cid)
       AND {where} ORDER BY f.seq, f.id LIMIT $6)) n
"""


async def read_neighbours(
    conn: asyncpg.Connection,
    scope: Scope,
    agents: list[str] | None,
    of: list[Any],
    window: int,
    filters: Filters,
) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """The `window` nearest rows on each side of each of `of` (rows with a thread) that pass the search's filters:
    (id -> neighbour ids nearest first, the neighbours' rows)."""
    placed = [r for r in of if r["thread"] is not None and r["seq"] is not None]
    if not placed or window <= 0:
        return {}, {}
    given, values = given_filters(agents, filters)
    found = await conn.fetch(
        neighbours_sql(given, filters.superseded),
        [r["id"] for r in placed],
        [r["thread"] for r in placed],
        [r["seq"] for r in placed],
        scope.tenant_id,
        scope.workspace,
        window,
        *values,
    )
    seq = {r["id"]: r["seq"] for r in placed}
    near: dict[str, list[str]] = defaultdict(list)
    rows: dict[str, Any] = {}
    for r in found:
        rows[r["id"]] = r
        near[r["near_of"]].append(r["id"])
    for i, ids in near.items():
        ids.sort(key=lambda j: (abs(rows[j]["seq"] - seq[i]), j))
    return dict(near), rows
