"""recall.relevance's order on rows made here: the context list, the lift, the time boost, and that a direct hit
stays ahead of a row that only borders it."""

import ast
import heapq
import random
from dataclasses import replace
from datetime import UTC, datetime

from memento_memory_api.recall.relevance import (
    _WORDS,
    WORDS_HELD,
    Tuning,
    Wanted,
    _best,
    context,
    context_ranking,
    order,
    parts,
    row_words,
    wanted,
)
from memento_shared.text.dates import TimeRange
from tests.fixtures.hash_seeds import outputs_under_hash_seeds

MAY = datetime(2023, 5, 8, tzinfo=UTC)


def row(i: str, content: str, seq: int | None = None, event: bool = False, said: datetime = MAY) -> dict:
    start = datetime(2023, 5, 7, tzinfo=UTC) if event else None
    end = datetime(2023, 5, 8, tzinfo=UTC) if event else None
    return {"id": i, "content": content, "topic": "", "expansion": None, "facts": None, "thread": "D1", "seq": seq,
            "event_from": start, "event_to": end, "event_said": said}  # fmt: skip


def want(text: str) -> Wanted:
    return wanted(text, now=MAY)


def ids(scored: list[tuple[str, float]]) -> list[str]:
    return [i for i, _ in scored]


def test_a_reply_is_found_by_the_question_before_it():
    rows = {
        "q": row("q", "Did you go to the pottery class?", 1),
        "a": row("a", "Yes, it was wonderful", 2),
        "x": row("x", "The weather is nice", 9),
    }
    near = {"q": ["a"], "x": []}
    lists = [["q", "x"]]
    ranked = context_ranking(lists, rows, context(lists, rows, near, want("pottery class").terms, 0.5))
    assert ranked == ["q", "a"]  # the reply joins, below the turn that holds the words itself


def test_a_direct_hit_stays_ahead_of_a_neighbour_the_vectors_prefer():
    # the two-memory case CI caught once: the vector list puts the neighbour first, the words only the hit
    rows = {"hit": row("hit", "The deploy bot is called hermes", 2), "other": row("other", "The build farm", 1)}
    near = {"hit": ["other"], "other": ["hit"]}
    scored = order([["other", "hit"], ["hit"]], rows, near, want("deploy bot"), Tuning())
    assert ids(scored)[0] == "hit"
    assert dict(scored)["other"] < dict(scored)["hit"]


def test_the_lift_gives_a_strong_hits_neighbours_a_share_of_its_score():
    rows = {"hit": row("hit", "alpha beta", 5), "next": row("next", "unrelated", 6), "far": row("far", "gamma", 40)}
    near = {"hit": ["next"]}
    tuning = Tuning(context_weight=0, time_boost=0, lift=0.5, lift_top=1)
    scored = dict(order([["hit", "far"]], rows, near, want("alpha"), tuning))
    assert scored["next"] == scored["hit"] * 0.5
    assert "next" not in dict(order([["hit", "far"]], rows, near, want("alpha"), Tuning(context_weight=0, lift=0)))


def test_a_best_row_that_asks_gives_its_answer_the_answer_lift():
    # "How is the puppy doing?" is answered by the turn after it, which shares no word with the question
    rows = {
        "ask": row("ask", "How is your new puppy adjusting?", 5),
        "answer": row("answer", "She is learning commands and house training", 6),
        "before": row("before", "Long time no talk", 4),
        "far": row("far", "a puppy class", 40),
    }
    near = {"ask": ["before", "answer"]}
    tuning = Tuning(context_weight=0, time_boost=0, lift=0.5, lift_top=1, answer_lift=0.85, question_discount=0)
    scored = dict(order([["ask", "far"]], rows, near, want("puppy adjusting"), tuning))
    assert scored["answer"] == scored["ask"] * 0.85 and scored["before"] == scored["ask"] * 0.5
    # with the question discount, the row that asks gives way to its answer
    discounted = dict(
        order([["ask", "far"]], rows, near, want("puppy adjusting"), replace(tuning, question_discount=0.2))
    )
    assert discounted["ask"] == scored["ask"] * 0.8 and discounted["answer"] == scored["answer"]
    statement = {**rows, "ask": row("ask", "My new puppy is adjusting.", 5)}  # no question: the plain lift
    assert (
        dict(order([["ask", "far"]], statement, near, want("puppy adjusting"), tuning))["answer"] == scored["ask"] * 0.5
    )


def test_a_lifted_answer_never_pushes_a_strong_direct_hit_out_of_the_top_k():
    # every row scoring above answer_lift x the best row (after the question discount) keeps its place in the top
    # k, whatever the lifts add
    rng = random.Random(53)
    for _ in range(200):
        k = rng.randint(2, 8)
        hits = [f"h{n}" for n in range(12)]
        rows = {
            h: row(h, rng.choice(["Did you go?", "I went to the pottery class"]), 10 * n) for n, h in enumerate(hits)
        }
        rows |= {f"a{n}": row(f"a{n}", "Yes", 10 * n + 1) for n in range(12)}
        near = {h: [f"a{n}"] for n, h in enumerate(hits)}
        lists = [rng.sample(hits, len(hits)), rng.sample(hits, len(hits))]
        tuning = Tuning(context_weight=0, time_boost=0, lift=0.5, lift_top=5, answer_lift=0.85)
        unlifted = replace(tuning, lift=0, answer_lift=0)  # the direct hits' own scores (rows that ask discounted)
        plain = dict(order(lists, rows, near, want("pottery"), unlifted))
        best = max(dict(order(lists, rows, near, want("pottery"), replace(unlifted, question_discount=0))).values())
        strong = [h for h, s in sorted(plain.items(), key=lambda p: -p[1])[:k] if s > 0.85 * best]
        assert set(strong) <= set(ids(order(lists, rows, near, want("pottery"), tuning))[:k])


def test_the_context_list_leaves_out_rows_far_under_its_best():
    # in a small store, rows holding only a word nearly every row holds (the speaker's name) took the context list's
    # next ranks, and RRF fuses ranks: they passed a direct hit once it was discounted for asking
    rows = {
        "hit": row("hit", "Caroline: the pottery workshop", 1),
        **{f"c{n}": row(f"c{n}", f"Caroline: the weather {n}", 10 + n) for n in range(4)},
    }
    lists = [["hit", "c0", "c1", "c2", "c3"]]
    known = context(lists, rows, {}, want("Caroline pottery workshop").terms, 0.5)
    assert context_ranking(lists, rows, known, floor=0.2) == ["hit"]
    assert context_ranking(lists, rows, known)[0] == "hit" and len(context_ranking(lists, rows, known)) == 5


def test_the_rows_the_lift_starts_from_are_the_best_by_score_then_id():
    rng = random.Random(28)
    for size in (1, 3, 5, 6, 40):
        names = [f"r{n:02d}" for n in range(size)]
        rng.shuffle(names)  # ids not in the order the scores were made in
        scores = {i: rng.choice([0.1, 0.2, 0.25, 0.3]) for i in names}  # many equal scores
        for n in (1, 5):
            assert _best(scores, n) == heapq.nsmallest(n, scores.items(), key=lambda pair: (-pair[1], pair[0]))


def test_a_when_question_prefers_rows_that_name_a_time():
    rows = {
        "plain": row("plain", "I joined the support group", 1),
        "dated": row("dated", "support group", 7, event=True),
    }
    lists = [["plain", "dated"]]
    tuning = Tuning(context_weight=0, lift=0)
    assert ids(order(lists, rows, {}, want("When did she join the support group?"), tuning))[0] == "dated"
    assert ids(order(lists, rows, {}, want("Did she join the support group?"), tuning))[0] == "plain"


def test_a_question_naming_a_time_prefers_rows_about_that_time():
    rows = {
        "may": row("may", "the trip", 1, event=True),
        "none": row("none", "the trip", 2, said=datetime(2023, 7, 1, tzinfo=UTC)),
    }
    may = TimeRange(datetime(2023, 5, 1, tzinfo=UTC), datetime(2023, 6, 1, tzinfo=UTC), "month")
    asked = Wanted(frozenset({"trip"}), False, (may,))
    assert ids(order([["none", "may"]], rows, {}, asked, Tuning(context_weight=0, lift=0)))[0] == "may"


def test_off_is_plain_rrf():
    rows = {i: row(i, "words", n) for n, i in enumerate("abc")}
    plain = order([["a", "b"], ["c", "a"]], rows, {}, want("words"), Tuning(context_weight=0, lift=0, time_boost=0))
    assert ids(plain) == ["a", "c", "b"]


def test_a_question_of_several_clauses_is_split_and_a_list_of_names_is_not():
    assert parts("When did Caroline meet people on a hike and have a negative experience?") == [
        "When did Caroline meet people on a hike",
        "have a negative experience?",
    ]
    assert parts("What did Mel and her kids make during the pottery workshop?") == []
    assert parts("deploy bot") == []


def test_each_parts_list_weighs_decompose():
    rows = {i: row(i, "words", n) for n, i in enumerate("abc")}
    lists = [["a", "b"]]
    assert ids(order(lists, rows, {}, want("x"), Tuning(context_weight=0, lift=0), [["c"]]))[0] == "a"
    assert ids(order(lists, rows, {}, want("x"), Tuning(context_weight=0, lift=0, decompose=2), [["c"]]))[0] == "c"


def test_equal_context_scores_keep_the_engines_order_not_the_ids():
    rows = {"b-first": row("b-first", "production every Tuesday", 1), "a-second": row("a-second", "production", 2)}
    # both hold the question's one word alike; the engine's lists put b-first ahead, and the ids say the opposite
    fused, lists = {"b-first": 0.2, "a-second": 0.1}, [["b-first", "a-second"]]
    assert context_ranking(lists, rows, context(lists, rows, {}, want("production").terms, 0.5), fused) == [
        "b-first",
        "a-second",
    ]


def test_a_rows_words_follow_its_text_and_the_cache_stays_bounded():
    # words are kept per row id with the texts they were split from: an amended row must not keep its old words
    assert {"blue", "bowl"} <= row_words(row("amended", "a blue bowl"))
    assert "blue" not in row_words(row("amended", "a red cup")) and "red" in row_words(row("amended", "a red cup"))
    expanded = {**row("amended", "a red cup"), "expansion": "caroline"}
    assert "carolin" in row_words(expanded)  # stems (text.stems), as the question's words are
    for n in range(WORDS_HELD + 10):
        row_words(row(f"r{n}", f"turn {n}"))
    assert len(_WORDS) == WORDS_HELD


def test_every_neighbour_given_counts():
    # the engine reads the neighbours of the lexical list's first candidates; the order uses all it is given
    rows = {
        "x": row("x", "pottery class pottery", 5),
        "q": row("q", "Did you go to the pottery class?", 1),
        "a": row("a", "Yes, it was wonderful", 2),
    }
    assert "a" in ids(order([["x", "q"]], rows, {"q": ["a"]}, want("pottery class"), Tuning()))
    assert "a" not in ids(order([["x", "q"]], rows, {}, want("pottery class"), Tuning()))


def _turns() -> dict:
    return {
        "q": row("q", "Did you go to the pottery class?", 1),
        "a": row("a", "Yes, it was wonderful", 2),
        "v": row("v", "a class on glazing pottery", 7),
        "x": row("x", "The weather is nice", 9),
    }


def test_a_context_made_before_the_vector_list_orders_as_one_made_after_when_it_brings_no_new_row():
    # the engine scores the context while the model embeds the question, over the rows it has by then
    rows, near, asked = _turns(), {"q": ["a"]}, want("pottery class")
    before = context([["q", "x"]], rows, near, asked.terms, Tuning().neighbour_share)
    assert before.seen == {"q", "x", "a"} and set(before.scores) == {"q", "a"}
    ranked = [["x", "q"], ["q", "x"]]
    assert order(ranked, rows, near, asked, Tuning(), known=before) == order(ranked, rows, near, asked, Tuning())


def test_a_row_only_the_vector_list_found_is_scored_by_its_own_words():
    rows, near, asked = _turns(), {"q": ["a"]}, want("pottery class")
    before = context([["q", "x"]], rows, near, asked.terms, Tuning().neighbour_share)
    assert before.own(rows["v"]) == before.scores["q"]  # both words its own, weighed as among q, x and a
    assert before.own(rows["x"]) == 0
    ranked = [["v", "x"], ["q", "x"]]
    fused = {"q": 0.1, "v": 0.2, "x": 0.3}  # the tie goes the fused lists' way, not the ids'
    assert context_ranking(ranked, rows, before, fused)[:2] == ["v", "q"]
    ranking = context_ranking(ranked, rows, before)
    assert ranking[:2] == ["q", "v"] and "x" not in ranking  # x holds no word, nor does a row beside it
    assert ids(order(ranked, rows, near, asked, Tuning(question_discount=0), known=before))[:2] == ["q", "v"]
    assert ids(order(ranked, rows, near, asked, Tuning(), known=before))[0] == "v"  # q asks: discounted


# Scores rows holding the same question's words among rows holding other words too; prints each row's score exactly.
_SAME_WORDS = """
import random
from memento_memory_api.recall.relevance import context, words
rng = random.Random(5)
terms = words("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima")
pool = sorted(terms) + [f"other{n}" for n in range(40)]
rows = {}
for n in range(120):
    held = rng.sample(sorted(terms), 7) if n % 2 else sorted(terms)[:7]  # half of them the same seven words
    rows[f"r{n:03d}"] = {"id": f"r{n:03d}", "content": " ".join(held + rng.sample(pool[12:], 6)), "topic": "",
                         "expansion": None, "facts": None}
made = context([sorted(rows)], rows, {}, terms, 0.5)
print(repr(sorted(made.scores.items())))
print(repr([made.own(rows[i]) for i in sorted(rows)]))
"""


def test_rows_holding_the_same_words_score_the_same_in_every_process():
    """A row's score does not depend on the order its words' set iterates in, which changes with each process's string
    hashing: summed as they came, rows holding the same words scored apart in the last bit, so their order (equal
    scores go to the lists' fused score, then the id) differed from one memory-api process to the next."""
    outputs = outputs_under_hash_seeds(_SAME_WORDS)
    for output in outputs:
        scores, own = (ast.literal_eval(line) for line in output.splitlines())
        same = {score for i, score in scores if int(i[1:]) % 2 == 0}  # the rows holding the first seven words
        assert len(same) == 1, same
        assert len({own[n] for n in range(0, 120, 2)}) == 1
    assert len(set(outputs)) == 1


def test_the_second_hop_never_moves_the_best_rows_before_it():
    # issue 53: whatever the hop's list and weight, the `hop_keep` best rows keep their places, and at a weight above
    # every other list's the hop's rows come right after them
    rng = random.Random(531)
    for _ in range(200):
        rows = {f"r{n}": row(f"r{n}", rng.choice(["I went to the pottery class", "we talked"]), n) for n in range(20)}
        lists = [rng.sample(sorted(rows), 12), rng.sample(sorted(rows), 12)]
        keep = rng.randint(1, 5)
        tuning = Tuning(context_weight=0, time_boost=0, lift=0, answer_lift=0, hop=rng.choice([1.0, 6.0, 16.0]))
        before = ids(order(lists, rows, {}, want("pottery"), replace(tuning, hop=0)))
        hop = rng.sample(sorted(rows), 6)
        after = ids(order(lists, rows, {}, want("pottery"), replace(tuning, hop_keep=keep), hops=hop))
        assert after[:keep] == before[:keep]
        if tuning.hop == 16.0:  # heavier than every other list: the hop's rows follow the kept ones
            rest = [i for i in hop if i not in before[:keep]]
            assert set(after[keep : keep + len(rest)]) == set(rest)
