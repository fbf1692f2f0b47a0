"""Seed 000's FragmentFactory (§6.2): a remembered text made a row of the one store, for remember, batch_remember
and reflect."""

from __future__ import annotations

from typing import Any

from memento_memory_api.context import ToolContext
from memento_memory_api.store import new_row
from memento_shared.domain.fragments import DEFAULT_IMPORTANCE, infer_ttl, truncate
from memento_shared.text.keywords import extract_keywords, normalise_keywords
from memento_shared.text.redaction import redact_pii
from memento_shared.tools.fragments import FragmentFields


def build_fragment(args: FragmentFields, ctx: ToolContext) -> dict[str, Any]:
    """FragmentFactory (§6.2): mask PII, truncate, hash, keywords, importance, TTL tier, tokens."""
    content = truncate(redact_pii(args.content))
    keywords = normalise_keywords(args.keywords) if args.keywords else extract_keywords(content)
    importance = args.importance if args.importance is not None else DEFAULT_IMPORTANCE[args.type]
    return new_row(
        ctx,
        content,
        topic=args.topic.strip(),
        keywords=keywords,
        type=args.type,
        importance=float(importance),
        source=args.source,
        ttl_tier=infer_ttl(args.type, importance),
        is_anchor=args.isAnchor,
        case_id=args.caseId,
        keywords_given=bool(args.keywords),
    )
