"""text.relations: a question relating two events is split into its ask and its anchor clause, in English and
Korean; idioms, date expressions (text.dates' job), "when"/"while" clauses and questions that ask the gap are not
relations."""

import pytest

from memento_shared.text.relations import Relation, relation


@pytest.mark.parametrize(
    ("question", "side", "ask", "anchor"),
    [
        ("What did Caroline do after the adoption meeting?", "after", "What did Caroline do?", "the adoption meeting"),
        ("What did Mel paint before her trip to Paris?", "before", "What did Mel paint?", "her trip to Paris"),
        ("Before her trip to Paris, what did Mel paint?", "before", "what did Mel paint?", "her trip to Paris"),
        (
            "When did John meet his teammates after returning from Chicago?",
            "after",
            "When did John meet his teammates?",
            "returning from Chicago",
        ),
        ("What did she do just after the party?", "after", "What did she do?", "the party"),
    ],
)
def test_an_english_question_is_split_into_its_ask_and_its_anchor(question, side, ask, anchor):
    assert relation(question) == Relation(side, ask, anchor)


@pytest.mark.parametrize(
    ("question", "side", "ask", "anchor"),
    [
        ("캐롤라인은 입양 모임 후에 뭐 했어?", "after", "뭐 했어?", "캐롤라인은 입양 모임"),
        ("멜은 파리에 가기 전에 뭘 그렸어?", "before", "뭘 그렸어?", "멜은 파리에 가기"),
        ("회의가 끝난 뒤 무엇을 했나요?", "after", "무엇을 했나요?", "회의가 끝난"),
        ("민수는 이사한 다음에 어디서 일했어?", "after", "어디서 일했어?", "민수는 이사한"),
        ("그런데, 캠핑 간 후에 뭐 먹었어?", "after", "그런데, 뭐 먹었어?", "캠핑 간"),
    ],
)
def test_a_korean_question_is_split_into_its_ask_and_its_anchor(question, side, ask, anchor):
    assert relation(question) == Relation(side, ask, anchor)


@pytest.mark.parametrize(
    "question",
    [
        "What did Jon decide after all?",
        "Before I forget, where did I park the car?",
        "What did we decide after that?",
        "Have you ever seen it before?",
        "It is better than before, isn't it?",
        "When did Caroline go to the adoption meeting?",  # "when" asks: text.dates reads it
        "How did Joanna feel when someone wrote her a letter?",  # the answer is the anchor's own row
        "How does Tim feel while surfing?",
        "캠핑 갔을 때 뭐 먹었어?",
        "What happened the day after?",  # a date expression (text.dates), not an event
        "What did John do the week before August 3, 2023?",
        "What did Maria do last weekend before April 10, 2023?",
        "After how many weeks did Tim call the fan from California?",  # the clause after it asks
        "What did she do after?",  # no anchor
        "What did they say before it?",  # a pronoun only
        "3일 전에 뭐 했어?",
        "얼마 전에 본 영화는?",
        "전에 말했듯이 그건 뭐였지?",
        "그 후에 어떻게 됐어?",
        "Where did Caroline go last May?",
        "What was the baby named after her grandmother?",  # a phrasal verb, not an event (review)
        "Tell me about the after-school program",
        "What did I say before about the API?",
        "Should I run tests before or after the merge?",  # both sides asked
        "What changed before and after the migration?",
        "어제 회의에서 전 무슨 말을 했지?",  # the pronoun 전 (저는)
        "회사 전 직원이 참석했어?",  # 전 as "all"
    ],
)
def test_not_a_relation(question):
    assert relation(question) is None


def test_a_phrasal_after_leaves_the_real_relation_in_the_question():
    found = relation("Who will look after the dog before the trip?")
    assert found is not None and (found.side, found.anchor) == ("before", "the trip")
