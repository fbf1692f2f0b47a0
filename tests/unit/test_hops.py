"""recall.hops' ranking on rows made here (issue 53): what the person said before what only names them, statements
before questions, and the cosines of the stacked product equal to each row's own."""

import numpy as np

from memento_memory_api.recall.hops import _cosines, rank
from memento_shared.text.links import asked, entity_tokens

QUESTION = "What activities has Melanie done with her family?"
SAID = "(1:56 pm on 8 May, 2023)"


def hop_row(i: str, content: str, vector: list[float] | None) -> dict:
    return {"id": i, "content": content, "topic": "", "expansion": None, "facts": None,
            "entities": entity_tokens(content), "hop_vector": np.asarray(vector) if vector else None}  # fmt: skip


def test_what_the_person_said_ranks_above_what_only_names_them():
    ask = asked(QUESTION)
    assert ask is not None
    rows = [
        hop_row("named", f"Caroline {SAID}: Melanie, your pottery class sounds fun", [1.0, 0.0]),
        hop_row("said", f"Melanie {SAID}: I went to a pottery class", [1.0, 0.0]),
    ]
    assert rank(rows, ask, [], frozenset(), np.asarray([1.0, 0.0])) == ["said", "named"]


def test_a_question_ranks_below_a_statement_of_the_same_strength():
    ask = asked(QUESTION)
    assert ask is not None
    rows = [
        hop_row("asks", f"Melanie {SAID}: Did you go swimming?", [0.9, 0.1]),
        hop_row("says", f"Melanie {SAID}: We went swimming!", [0.9, 0.1]),
    ]
    assert rank(rows, ask, [], frozenset(), np.asarray([1.0, 0.0])) == ["says", "asks"]


def test_the_stacked_cosines_are_each_rows_own():
    rng = np.random.default_rng(53)
    vectors = [rng.normal(size=8) for _ in range(5)]
    rows = [{"hop_vector": v} for v in vectors] + [{"hop_vector": None}]
    query = rng.normal(size=8)
    expected = [float(v @ query / (np.linalg.norm(v) * np.linalg.norm(query))) for v in vectors] + [0.0]
    assert np.allclose(_cosines(rows, query), expected)
    assert _cosines(rows, None) == [0.0] * 6  # no question vector (the embedder down): no cosine
