"""Speed of the write-path annotation (issue 28): memento_memory_api.text.annotate.annotate over conversation turns of
about 300 characters, English and Korean, with and without dates. Prints the median and p95 per call in milliseconds;
the target is under 0.3 ms. Not a test: timings depend on the machine's load.

    python -m bench.annotate_speed [--rounds 2000]
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import UTC, datetime

from memento_memory_api.text.annotate import annotate, query_expansion

TEXTS = {
    "english, dated header": (
        "Caroline (1:56 pm on 8 May, 2023): I went to a LGBTQ support group yesterday and it was so powerful. "
        "Melanie told me about the Pride parade in Boston last Friday, and we talked with Dr. Smith about the "
        "adoption agency. I'm going to paint a sunrise for the art show at the Bank of America building next week."
    ),
    "english, no dates": (
        "We adopted a rescue dog from the animal shelter and the shelter staff were very kind. The kids named him "
        "Oscar. He loves long walks by the lake and chasing the neighbour's cat. Melanie says he is the best thing "
        "that happened to the family this year, and I agree with her completely; he sleeps on my feet every night."
    ),
    "korean": (
        "민수 (2023년 5월 8일 오후 3시 20분): 어제 지민이랑 서울에서 요가 수업에 갔어. 지난주 금요일에는 김 씨가 "
        "부산에서 올라와서 같이 저녁을 먹었고, 다음 달에 제주도로 여행을 가기로 했어. Google에서 일하는 친구도 "
        "온다고 했는데 아직 모르겠어. 요즘 회사 일이 너무 많아서 주말에도 쉬지 못했어. 그래도 다음 주 월요일에는 "
        "휴가를 내고 영희랑 같이 해운대에 가서 바다를 보려고 해. 작년 여름에 갔던 그 카페에도 다시 가 보고 싶어. "
        "철수 씨도 시간이 되면 같이 가자고 했으니까 내일 전화해 봐야지."
    ),
}
QUESTIONS = ("When did Caroline go to the LGBTQ support group?", "민수는 지난주에 어디 갔어?")


def _measure(call, rounds: int) -> tuple[float, float]:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    written_at = datetime(2024, 3, 13, 15, 0, tzinfo=UTC)
    for label, text in TEXTS.items():
        annotate(text, source="D1:3", session_id=None, written_at=written_at)  # warm the regex caches
        median, p95 = _measure(
            lambda t=text: annotate(t, source="D1:3", session_id=None, written_at=written_at), args.rounds
        )
        print(f"annotate  {label:<24} {len(text):>4} chars  median {median:.3f} ms  p95 {p95:.3f} ms")
    for question in QUESTIONS:
        median, p95 = _measure(lambda q=question: query_expansion(q, written_at), args.rounds)
        print(f"question  {question[:40]:<40}  median {median:.3f} ms  p95 {p95:.3f} ms")


if __name__ == "__main__":
    main()
