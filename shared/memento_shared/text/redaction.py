"""PII masking for fragment content (seed 000 §6.2): destructive, applied before hashing and storage."""

from __future__ import annotations

import re

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"sk-[a-zA-Z0-9]{32,}|AIza[0-9A-Za-z\-_]{35}"), "[REDACTED_API_KEY]"),
    (
        re.compile(
            r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
            r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+"
        ),
        "[REDACTED_EMAIL]",
    ),
    (re.compile(r"(password|passwd|pwd|비밀번호|비번)(\s*[:=]\s*)\S+", re.I), r"\1\2[REDACTED_PWD]"),
    (re.compile(r"01[016789][-\s]?\d{3,4}[-\s]?\d{4}"), "[REDACTED_PHONE]"),
]


# The tokens' words, as keyword extraction sees them: they say nothing about a fragment, so they are never keywords.
MASK_WORDS = frozenset(
    word.lower() for _, replacement in _PATTERNS for word in re.findall(r"\[(REDACTED_[A-Z_]+)\]", replacement)
)


def redact_pii(text: str) -> str:
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text
