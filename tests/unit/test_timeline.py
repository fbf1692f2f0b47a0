"""recall.timeline through recall.relevance's order: a question relating two events finds its anchor's row among the
rows read, puts the rows on the asked side of its time up and those on the wrong side down, and never moves the kept
best rows."""

import random
from dataclasses import replace
from datetime import UTC, datetime

from memento_memory_api.recall import timeline
from memento_memory_api.recall.relevance import Tuning, order, row_words, wanted
from memento_shared.text.relations import Relation

NOW = datetime(2023, 9, 1, tzinfo=UTC)
PLAIN = Tuning(context_weight=0, lift=0, answer_lift=0, question_discount=0, time_boost=0, hop_keep=1)


def row(i: str, content: str, day: int, month: int = 5, event: tuple[int, int] | None = None) -> dict:
    """A turn said at 1 pm on `day`/`month` 2023; `event`, the (month, day) it names as its event's."""
    start = datetime(2023, event[0], event[1], tzinfo=UTC) if event else None
    end = datetime(2023, event[0], event[1] + 1, tzinfo=UTC) if event else None
    said = datetime(2023, month, day, 13, tzinfo=UTC)
    return {"id": i, "content": content, "topic": "", "expansion": None, "facts": None, "thread": "D", "seq": day,
            "event_from": start, "event_to": end, "event_said": said}  # fmt: skip


ROWS = {
    r["id"]: r
    for r in [
        row("meeting", "Caroline: the adoption meeting was today, so moving", 8),
        row("early", "Caroline: I painted a sunrise over the lake", 2),
        row("earlier", "Caroline: I marched in the pride parade", 1),
        row("later", "Caroline: I painted a sunset with my kids", 20),
        row("latest", "Caroline: I joined a new support group", 25),
        row("same_day", "Caroline: afterwards I went to the beach", 8),
    ]
}
# the lists rank the rows before the meeting above those after it
LISTS = [["meeting", "early", "earlier", "same_day", "later", "latest"]]


def ids(question: str, tuning: Tuning = PLAIN, rows: dict = ROWS, lists: list = LISTS) -> list[str]:
    return [i for i, _ in order(lists, rows, {}, wanted(question, now=NOW, asked=question), tuning)]


def test_after_puts_the_rows_after_the_anchor_up_and_those_before_it_down():
    found = ids("What did Caroline do after the adoption meeting?")
    assert found[0] == "meeting"  # the anchor's row, a kept best row
    assert found.index("later") < found.index("early") and found.index("latest") < found.index("earlier")
    assert found.index("same_day") < found.index("early")  # the anchor's own day is on the asked side


def test_before_puts_the_rows_before_the_anchor_up_and_those_after_it_down():
    lists = [list(reversed(LISTS[0]))]
    found = ids("What did Caroline do before the adoption meeting?", lists=lists)
    assert found[0] == "latest"  # kept: the best row before the move stays first, on the wrong side or not
    assert found.index("early") < found.index("later")


def test_without_a_relation_or_with_it_off_the_order_is_the_lists():
    assert ids("What did Caroline do at the adoption meeting?") == LISTS[0]
    assert ids("What did Caroline do after the adoption meeting?", replace(PLAIN, relation=0)) == LISTS[0]


def test_an_anchor_no_row_holds_moves_nothing():
    assert ids("What did Caroline do after the chess tournament?") == LISTS[0]


def test_a_rows_times_are_the_time_it_names_and_the_moment_it_was_told():
    after, before = Relation("after", "", ""), Relation("before", "", "")
    # told on the 30th about a meeting on 10 May
    meeting = row("meeting", "Caroline: the adoption meeting on 10 May went well", 30, event=(5, 10))
    at = timeline.days(meeting)
    assert at == (datetime(2023, 5, 10, tzinfo=UTC), datetime(2023, 5, 31, tzinfo=UTC))
    assert timeline.side(ROWS["later"], at, after) == 1 and timeline.side(ROWS["later"], at, before) == 1
    assert timeline.side(ROWS["same_day"], at, after) == -1  # told the 8th of nothing dated: before the 10th
    assert timeline.side(row("june", "a new job", 2, month=6), at, before) == -1  # after both
    # a reply told the day the anchor was, about the day before: not put before it
    yesterday = row("hike", "we went hiking yesterday", 30, event=(5, 29))
    assert timeline.side(yesterday, at, after) == 1
    across = {**row("across", "that week", 9), "event_from": datetime(2023, 5, 1, tzinfo=UTC)}
    across["event_to"] = datetime(2023, 5, 12, tzinfo=UTC)
    assert timeline.side(across, at, after) == 0  # neither side: spans the anchor's first day, told before it
    assert timeline.side({**across, "event_from": None, "event_said": None}, at, after) == 0  # no time at all


def test_the_anchor_is_the_row_holding_most_of_its_rare_words():
    terms = wanted("x after the adoption meeting", asked="x after the adoption meeting", now=NOW).anchor_terms
    scores = dict.fromkeys(ROWS, 1.0)
    assert timeline.anchor(scores, ROWS, terms, row_words) == "meeting"
    assert timeline.anchor(scores, ROWS, frozenset({"chess"}), row_words) is None


def test_the_kept_best_rows_never_move():
    rng = random.Random(532)
    texts = ["Caroline: the adoption meeting", "Caroline: painting", "Caroline: we talked"]
    for _ in range(200):
        rows = {f"r{n}": row(f"r{n}", rng.choice(texts), rng.randint(1, 28)) for n in range(20)}
        lists = [rng.sample(sorted(rows), 12), rng.sample(sorted(rows), 12)]
        keep = rng.randint(1, 5)
        tuning = replace(PLAIN, hop_keep=keep, relation=rng.choice([0.3, 0.6, 0.9]))
        question = rng.choice(["What did she paint after the adoption meeting?", "What before the adoption meeting?"])
        before = ids(question, replace(tuning, relation=0), rows, lists)
        after = ids(question, tuning, rows, lists)
        assert after[:keep] == before[:keep]
        assert sorted(after) == sorted(before)
