"""Seed 000 fragment rules: PII masking, truncation, hashing, keywords, TTL tiers, tokens."""

from __future__ import annotations

import pytest

from memento_shared.domain.fragments import content_hash, infer_ttl, truncate
from memento_shared.text.keywords import extract_keywords
from memento_shared.text.redaction import redact_pii
from memento_shared.text.tokenizer import count_tokens, encoder_available


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key sk-" + "a" * 40 + " here", "key [REDACTED_API_KEY] here"),
        ("google AIza" + "B" * 35, "google [REDACTED_API_KEY]"),
        ("mail me at jane.doe+x@mail.example.co.kr", "mail me at [REDACTED_EMAIL]"),
        ("db password: s3cr3t!", "db password: [REDACTED_PWD]"),
        ("PWD=abc", "PWD=[REDACTED_PWD]"),
        ("비밀번호: 1234 입니다", "비밀번호: [REDACTED_PWD] 입니다"),
        ("call 010-1234-5678", "call [REDACTED_PHONE]"),
        ("call 01012345678", "call [REDACTED_PHONE]"),
        ("nothing secret here", "nothing secret here"),
    ],
)
def test_pii_masking(text, expected):
    assert redact_pii(text) == expected


def test_truncation_and_hash():
    assert truncate("short") == "short"
    long = truncate("x" * 301)
    assert len(long) == 300 and long.endswith("…")
    assert content_hash("abc") == "ba7816bf8f01cfea"  # first 16 hex of sha256("abc")


@pytest.mark.parametrize(
    ("ftype", "importance", "tier"),
    [
        ("preference", 0.1, "permanent"),
        ("fact", 0.8, "permanent"),
        ("error", 0.7, "hot"),
        ("procedure", 0.2, "hot"),
        ("fact", 0.6, "warm"),
        ("decision", 0.5, "warm"),
        ("fact", 0.49, "cold"),
    ],
)
def test_ttl_inference_follows_the_table_in_order(ftype, importance, tier):
    assert infer_ttl(ftype, importance) == tier


def test_keywords_by_term_frequency_without_stopwords():
    text = "The Redis cache and the Redis cluster: cache misses spike when the cluster fails over. Redis!"
    assert extract_keywords(text) == ["redis", "cache", "cluster", "misses", "spike"]
    assert extract_keywords("서버가 다운되면 서버를 재시작하고 로그를 확인한다")[:1] == ["서버"]
    assert len(extract_keywords("a b c d e f g h alpha beta gamma delta epsilon zeta eta")) == 5


def test_masking_tokens_are_never_extracted_as_keywords():
    masked = redact_pii("reach ops@example.com or 010-1234-5678, password: hunter2, key sk-" + "a" * 40)
    assert "[REDACTED_EMAIL]" in masked and "[REDACTED_PWD]" in masked and "[REDACTED_PHONE]" in masked
    keywords = extract_keywords(masked + " " + masked, limit=20)
    assert keywords and not [k for k in keywords if k.startswith("redacted")]


def test_tokens_use_cl100k_offline():
    assert encoder_available()
    assert count_tokens("hello world") == 2
