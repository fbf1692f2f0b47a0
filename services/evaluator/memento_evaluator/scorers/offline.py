"""The offline scorer: deterministic rules, no network. Same text and same store, same score.

quality = 0.35 x specificity + 0.35 x actionability + 0.30 x novelty, rounded to 3 decimals, where

- specificity = 0.5 x concreteness + 0.5 x length - vagueness, clamped to [0, 1]
  - concreteness = min(1, signals / 3); one signal per number, version (v2.3, 1.4.0), path or URL, code-like
    identifier (snake_case, camelCase, dotted.name, --flag), or `quoted`/"quoted" span
  - length = min(1, max(0, words - 3) / 12): full marks from 15 words; one-liners of three words score 0
  - vagueness = 0.15 per vague word (thing, stuff, something, somehow, maybe, probably, various, etc, 뭔가, 아마,
    등등), at most 0.3
- actionability = type prior + 0.2 per action cue (at most 2), clamped to [0, 1]
  - prior: procedure 0.6; decision, error, preference 0.5; fact, relation 0.2
  - cues: an imperative first word (use, run, set, add, remove, avoid, check, restart, call, prefer, install,
    update, never, always, ...), a modal or rule (must, should, need to, make sure, do not, don't, instead of),
    a cause or fix (because, fixed by, resolved by, workaround, caused by), or the Korean equivalents
    (해야, 하세요, 하지 마, 금지, 사용, 때문에, 해결)
- novelty = 1 - the highest pg_trgm similarity to the NOVELTY_WINDOW most recent other fragments of the same agent
  (and as many of the shared `default` namespace) in the workspace; 1 when there are none. Recent, because the
  trigram index cannot serve `%` under row-level security (pg_trgm's operators are not leakproof), and comparing
  with the whole namespace would cost a scan of it per write.
"""

from __future__ import annotations

import re

from memento_evaluator.scorers import Fragment, Score

_SIGNALS = [
    re.compile(r"\bv?\d+(?:\.\d+)+\b"),  # versions and dotted numbers
    re.compile(r"(?<![\w.])\d+(?:[.,:]\d+)?(?:%|ms|s|m|h|d|gb|mb|kb)?\b", re.IGNORECASE),  # numbers, times, sizes
    re.compile(r"(?:https?://|~?/)[\w./-]+"),  # URLs and paths
    re.compile(r"\b[a-z]+(?:_[a-z0-9]+)+\b"),  # snake_case
    re.compile(r"\b[a-z]+[A-Z]\w*\b"),  # camelCase
    re.compile(r"\b\w+\.\w+(?:\.\w+)*\(?\)?"),  # dotted.names, calls
    re.compile(r"(?<!\w)--?[a-z][\w-]+"),  # command-line flags
    re.compile(r"`[^`]+`|\"[^\"]+\"|'[^']{2,}'"),  # quoted spans
]
_VAGUE = re.compile(
    r"\b(thing|things|stuff|something|somehow|maybe|probably|various|etc)\b|뭔가|아마|등등", re.IGNORECASE
)
_IMPERATIVES = {
    "use", "run", "set", "add", "remove", "avoid", "check", "restart", "call", "prefer", "install", "update",
    "never", "always", "keep", "put", "deploy", "rotate", "pin", "disable", "enable", "configure", "delete",
}  # fmt: skip
_RULES = re.compile(
    r"\b(must|should|need to|needs to|make sure|do not|don't|instead of|because|fixed by|resolved by|"
    r"workaround|caused by)\b|해야|하세요|하지 마|금지|사용|때문에|해결",
    re.IGNORECASE,
)
_PRIORS = {"procedure": 0.6, "decision": 0.5, "error": 0.5, "preference": 0.5, "fact": 0.2, "relation": 0.2}

# 50, not 200: pg_trgm's similarity to 200 rows was ~3 ms of Postgres CPU a write, the largest single share of a
# `remember` (issue 50, bench/README.md); an agent repeating itself does so within its last fifty writes
NOVELTY_WINDOW = 50
# the closest of the most recent fragments the same agent sees in its workspace, newest first through the scope index
NOVELTY_SQL = (
    "SELECT coalesce(max(similarity(content, $1)), 0) FROM ("
    " (SELECT content FROM agent_memory.fragments WHERE tenant_id = $2 AND workspace = $3 AND agent_id = $4"
    "  AND id <> $5 ORDER BY created_at DESC LIMIT $6)"
    " UNION ALL (SELECT content FROM agent_memory.fragments WHERE tenant_id = $2 AND workspace = $3"
    "  AND agent_id = 'default' AND $4 <> 'default' AND id <> $5 ORDER BY created_at DESC LIMIT $6)) recent"
)
# Row-level security's filter defeats the planner's row estimate, and it would sort the whole namespace to find
# the newest few; the scope index (tenant, workspace, agent, created_at DESC) gives them in order. One plan per
# connection: a custom plan per write (what PostgreSQL chose on some stores) cost 1.9 ms of planning, more than the
# statement ran (pg_stat_statements, issue 50), and the generic plan is the same walk of the scope index.
NOVELTY_PLAN = (
    "SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off; SET LOCAL plan_cache_mode = force_generic_plan"
)


def _clamp(value: float) -> float:
    return max(0.0, min(1.0, value))


def specificity(content: str) -> float:
    signals = sum(len(pattern.findall(content)) for pattern in _SIGNALS)
    words = len(content.split())
    concreteness = min(1.0, signals / 3)
    length = min(1.0, max(0, words - 3) / 12)
    vagueness = min(0.3, 0.15 * len(_VAGUE.findall(content)))
    return _clamp(0.5 * concreteness + 0.5 * length - vagueness)


def actionability(content: str, fragment_type: str) -> float:
    first = re.match(r"\W*(\w+)", content.lower())
    cues = int(bool(first and first.group(1) in _IMPERATIVES)) + len(_RULES.findall(content))
    return _clamp(_PRIORS.get(fragment_type, 0.2) + 0.2 * min(2, cues))


def quality(content: str, fragment_type: str, novelty: float) -> Score:
    parts = {
        "specificity": round(specificity(content), 3),
        "actionability": round(actionability(content, fragment_type), 3),
        "novelty": round(_clamp(novelty), 3),
    }
    value = 0.35 * parts["specificity"] + 0.35 * parts["actionability"] + 0.30 * parts["novelty"]
    return Score(round(value, 3), parts)


class OfflineScorer:
    name = "offline"
    local = True

    async def score(self, fragment: Fragment) -> Score:
        return quality(fragment.content, fragment.type, fragment.novelty)
