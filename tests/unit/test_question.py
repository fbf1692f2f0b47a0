"""What a search embeds (recall.question): a text within the bound whole, else its last question (with the sentence
before it when both fit), else its last sentence, and never more tokens than the bound."""

from __future__ import annotations

import pytest

from memento_memory_api.recall.question import last_message, question
from memento_shared.text.tokenizer import count_tokens

TURN = (
    "I deployed orders-api this morning and the Kafka dashboards looked normal for the first hour. "
    "After that the error rate climbed and the logs started showing ECONNRESET every few minutes. "
    "Can you look at the retry logic in orders-api and tell me whether it backs off correctly? "
    "Please keep the fix small, since we are close to the end of the sprint."
)


def test_a_text_within_the_bound_is_embedded_whole():
    assert question("  What did Caroline do after the move?  ", 32) == "What did Caroline do after the move?"
    two = "We moved billing to Kafka. Did that fix the lag?"
    assert question(two, 32) == two


def test_a_long_turn_embeds_its_last_question():
    assert (
        question(TURN, 32)
        == "Can you look at the retry logic in orders-api and tell me whether it backs off correctly?"
    )


def test_the_sentence_before_the_question_joins_it_when_both_fit():
    text = TURN + " We moved billing to Kafka. Did that fix it?"
    assert question(text, 32) == "We moved billing to Kafka. Did that fix it?"
    assert question(text, 8) == "Did that fix it?"


def test_without_a_question_the_last_sentence_is_embedded():
    text = TURN.replace("?", ".")
    assert question(text, 20) == "Please keep the fix small, since we are close to the end of the sprint."


def test_the_last_question_of_several_lines_and_scripts():
    text = "첫 번째 줄입니다.\n배포는 언제 했나요？\n" + "긴 설명이 이어집니다. " * 20
    assert question(text, 32) == "첫 번째 줄입니다. 배포는 언제 했나요？"
    assert question(text, count_tokens("배포는 언제 했나요？")) == "배포는 언제 했나요？"


@pytest.mark.parametrize("bound", [8, 16, 32])
def test_a_sentence_longer_than_the_bound_keeps_its_last_words(bound):
    words = [f"term{i}" for i in range(200)]
    chosen = question(" ".join(words) + "?", bound)
    assert chosen.endswith("term199?")
    assert count_tokens(chosen) <= bound + 2  # counted word by word: the join may merge a token or two
    assert len(chosen.split()) < 200


def test_the_turns_last_message_that_says_anything():
    assert last_message(["first question?", "the second one", "   "]) == "the second one"
    assert last_message([]) == ""
