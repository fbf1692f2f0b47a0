"""Finding the JSON array in a model's answer (memento_shared.llm.json_array, shared by distillation and facts) and
the facts prompt and parsing (memento_shared.text.facts): cleaned, deduplicated, bounded; garbage gives none."""

from __future__ import annotations

import json

import pytest

from memento_memory_api.distill import parse_extracted
from memento_shared.llm import json_array
from memento_shared.text import facts


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ('["a", "b"]', ["a", "b"]),
        ('Sure! Here they are:\n["a", "b"]\nAnything else?', ["a", "b"]),
        ('```json\n["a", ["nested"]]\n```', ["a", ["nested"]]),
        ('See note [1].\n```\n["the fenced one"]\n```', ["the fenced one"]),
        ('Note [1]: ["after", "prose brackets"]', [1]),  # no fence: the first array that parses
        ('[not json] then ["x"]', ["x"]),
        ("[]", []),
        ('{"facts": ["inside an object"]}', ["inside an object"]),
        ("no array here", None),
        ("[unclosed", None),
        ("", None),
    ],
)
def test_json_array_finds_the_array_a_model_wrote(answer, expected):
    assert json_array(answer) == expected


def test_json_array_gives_up_on_an_answer_of_brackets():
    assert json_array("[" * 10_000) is None


def test_facts_are_the_arrays_strings_cleaned_and_without_repeats():
    answer = "Facts:\n" + json.dumps(
        ["  Gina opened\n a  studio ", "gina OPENED a studio", 7, None, {"fact": "x"}, "", "Jon lost his job"]
    )
    assert facts.parse(answer) == ["Gina opened a studio", "Jon lost his job"]


def test_facts_are_bounded_in_number_and_length():
    many = [f"Fact number {i} about the launch" for i in range(20)]
    assert facts.parse(json.dumps(many)) == many[: facts.MAX_FACTS]
    long = "Caroline " + "went to the support group again " * 20
    [cut] = facts.parse(json.dumps([long]))
    assert len(cut) <= facts.MAX_CHARS and long.startswith(cut) and not cut.endswith(" ")
    assert long[len(cut)] == " ", "cut at a word boundary"
    unbroken = "x" * 500
    assert facts.parse(json.dumps([unbroken])) == ["x" * facts.MAX_CHARS]


@pytest.mark.parametrize("answer", ["I can't help with that.", '{"facts": "one"}', "[1, 2]", "[unclosed", ""])
def test_garbage_gives_no_facts(answer):
    assert facts.parse(answer) == []


def test_joined_facts_are_one_a_line_and_none_is_null():
    assert facts.joined(["a b", "c"]) == "a b\nc"
    assert facts.joined([]) is None


def test_the_prompt_holds_the_memory_bounded_and_its_topic():
    text = "Melanie: I ran a charity race on Saturday. " * 500
    sent = facts.prompt(text, "  running ")
    assert sent.startswith("TOPIC: running\nMEMORY:\n") and sent.endswith(text[: facts.MAX_INPUT])
    assert facts.prompt("Short one.", "") == "MEMORY:\nShort one."
    assert "JSON array of strings" in facts.SYSTEM and str(facts.MAX_FACTS) in facts.SYSTEM


def test_distillation_reads_its_array_through_the_same_function():
    answer = 'Here:\n```json\n[{"content": "The launch moved to March 3", "type": "decision"}, {"x": 1}]\n```'
    assert parse_extracted(answer) == [("The launch moved to March 3", "decision")]
    assert parse_extracted("no memories, sorry") is None
