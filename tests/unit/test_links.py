"""text.links (issue 53): the entities a memory links by, in English and Korean, and what a question asks of them."""

from memento_shared.text.links import (
    ACTIVITY,
    ANIMAL,
    EVENT,
    FOOD,
    INSTRUMENT,
    NAMED,
    PLACE,
    asked,
    entity_tokens,
    fact_tokens,
    word_kinds,
)

SAID = "(1:56 pm on 8 May, 2023)"


def test_a_turn_links_by_its_speaker_its_names_and_its_places():
    tokens = entity_tokens(f"Tim {SAID}: I went to a place in London a few years ago, like a Harry Potter movie!")
    assert tokens == sorted(["s:tim", "p:london", "n:harry potter", PLACE, NAMED])


def test_a_place_is_listed_or_follows_its_cue():
    assert "p:rome" in entity_tokens("Jon: Took a short trip last week to Rome to clear my mind")  # listed
    assert "p:smoky mountains" in entity_tokens("Tim: I snapped that pic on my trip to the Smoky Mountains")  # cue
    assert "n:valorant" in entity_tokens("Nate: I was in the final of a big Valorant tournament")  # no cue before it
    assert PLACE not in entity_tokens("Nate: I played Valorant with Joanna")


def test_what_names_nothing_links_by_nothing_but_its_speaker():
    assert entity_tokens("Deploys freeze on Fridays after noon") == []  # a weekday, though capitalised
    assert entity_tokens("Caroline: thanks, that means a lot") == ["s:caroline"]
    assert entity_tokens("Melanie: Melanie said hi") == ["s:melanie"]  # the speaker is no other name


def test_kinds_that_are_not_names_are_marked_by_their_words():
    tokens = entity_tokens(f"Melanie {SAID}: Yep, Caroline. I'm off to go swimming with the kids.")
    assert tokens == sorted(["s:melanie", "n:caroline", NAMED, ACTIVITY])
    assert word_kinds("We went camping, then to a music festival") == [ACTIVITY, EVENT]  # stems: "camped" too
    assert word_kinds("I made a chocolate cake for my puppy's birthday") == [FOOD, ANIMAL]
    assert word_kinds("I've been practicing the violin every night") == [INSTRUMENT]
    assert word_kinds("Let's talk about the show when you run by") == []  # words mostly meaning something else
    assert entity_tokens("민수: 주말에 등산을 다녀왔어") == sorted(["s:민수", ACTIVITY])  # 등산을: the stem 등산


# A coding agent's memories: each sentence holds a word the kind lists once had or whose stem they hold (entity_words).
CODING = [
    "Fixed the race condition in the cache invalidation, the keeper now retries",
    "The session cookie expires after an hour; third-party cookies are blocked",
    "cat the log and grep for the trace id",
    "Performance regression in recall: p95 went from 40 to 55 ms after the event loop change",
    "Naming convention: snake case for modules, a pet project of mine used camel case",
    "The integration test exercises the code path where the row is locked",
    "Climbing the call stack to find who emits the outbox event; bug hunting all morning",
    "Boxing an int in Java allocates; a memory fence orders the stores",
    "The import graph has cycles, and journaling on ext4 is on; run poetry lock after editing pyproject",
    "Sketch of the API: curry the handler, then exhibit the bug with a failing test",
    "Screening the PR list, a rally of reviews, then a 4 gig heap for the JVM",
    "Wrestling with mypy again, it went down a rabbit hole of generics",
    "First contentful paint is slow; the game loop drops frames; fish is my shell",
    "The config is baked into the image and the recipe in the Makefile runs it",
    "I was puzzled that the stargazers count differs; each rows batch is 500",
    "Wed Dec  2 12:32:05 UTC 2026 deploy finished, the pie chart in Grafana shows the split",
    "Parse the page with soup and store the party id in the row",
    "이벤트 루프가 막혀서 성능이 떨어졌다",
    "세션 쿠키가 만료되면 다시 로그인해야 한다",
    "헬스 체크가 실패해서 파드가 재시작됐다",
    "아래 그림처럼 서드 파티 라이브러리를 감싼다",
    "게임 서버 배포는 금요일에 하지 않는다",
    "파이 차트로 지연 시간을 보여 준다",
]


def test_coding_talk_gains_no_word_kind():
    marked = {text: word_kinds(text) for text in CODING}
    assert {text: kinds for text, kinds in marked.items() if kinds} == {}
    # the same lists still mark what a person did, by the forms that are no software word
    assert word_kinds("Her paintings hang in the hall; we went rowing and fishing") == [ACTIVITY]
    assert word_kinds("My sister's wedding was lovely, they served a cake") == [EVENT, FOOD]


def test_a_korean_turn_links_by_its_speaker_names_and_listed_places():
    tokens = entity_tokens("민수: 지난주에 지연이랑 부산에 다녀왔어")
    assert tokens == sorted(["s:민수", "n:지연", "p:부산", PLACE, NAMED])
    assert entity_tokens("민수: 오늘 회의는 길었어") == ["s:민수"]


def test_a_list_question_asks_for_the_kind_of_thing_about_its_person():
    where = asked("Which cities has John been to?")
    assert where is not None and where.subjects == ("s:john", "n:john") and where.kinds == (PLACE,)
    books = asked("What books has Tim read?")
    assert books is not None and books.kinds == (NAMED,) and books.names == frozenset({"tim"})
    both = asked("What do both Nate and Joanna like?")
    assert both is not None and both.kinds == () and set(both.subjects) == {"s:nate", "n:nate", "s:joanna", "n:joanna"}
    animal = asked("What animal do both Nate and Joanna like?")
    assert animal is not None and animal.kinds == (ANIMAL,)
    family = asked("What activities has Melanie done with her family?")
    assert family is not None and family.kinds == (ACTIVITY,)
    assert asked("What activities has Melanie done with her family?", by_words=False).kinds == ()  # type: ignore[union-attr]
    assert asked("How many children does Melanie have?") is not None


def test_a_question_for_one_thing_or_about_no_one_gets_no_hop():
    assert asked("What did Caroline research?") is None  # one thing, no list
    assert asked("Which cities are the best for a holiday?") is None  # about no one
    assert asked("When did Melanie paint a sunrise?") is None


def test_a_korean_question_asks_by_its_kind_word():
    city = asked("민수가 가 본 도시는?")
    assert city is not None and city.subjects == ("s:민수", "n:민수") and city.kinds == (PLACE,)  # "도시" is no name
    film = asked("지연이 본 영화는?")
    assert film is not None and film.kinds == (NAMED,)
    assert asked("민수는 뭐 했어?") is None  # no kind word: no list asked for
    sport = asked("민수가 좋아하는 운동은?")
    assert sport is not None and sport.kinds == (ACTIVITY,)


def test_the_facts_names_join_the_memorys_own():
    own = entity_tokens("Gina: I finally opened my studio downtown last week!")
    assert own == ["s:gina"]
    # Gina opens each fact: known, she is its speaker, so no other name; Jon and Austin are new
    assert fact_tokens("Gina opened a studio\nGina went to Austin with Jon", own) == sorted(
        ["s:gina", "p:austin", "n:jon", PLACE, NAMED]
    )
