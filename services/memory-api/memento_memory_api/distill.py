"""Offline, extractive text work for seed 003: the summary that replaces consolidated memories, the memories a
transcript holds (memento_extract), and the identity crystal. Deterministic and rule-based: what Memento does with no
LLM configured (SPEC "Offline first")."""

from __future__ import annotations

import re
from typing import Any

from memento_shared.llm import json_array

# a stored memory holding this share of a candidate's meaningful words (recall.similar.lexical_relevance) already
# says it: the candidate is not novel
KNOWN = 0.6
_SENTENCE = re.compile(r"(?<=[.!?。])\s+|\n+")
_SPEAKER = re.compile(r"^\s*(?:[\w .-]{1,40}|\[[^\]]{1,40}\])\s*:\s+")
_DECISION = re.compile(
    r"\b(decided|decide|we will|we'll|going with|chose|choose|agreed|settled on)\b|결정|하기로", re.I
)
_INSTRUCTION = re.compile(
    r"^(always|never|don't|do not|make sure|remember to|use|avoid|prefer)\b|항상|절대|하지 마", re.I
)
_FACT = re.compile(
    r"\b(is|are|was|were|has|have|uses|runs|lives|works|moved|prefers|likes|needs|costs|takes|deadline|version)\b"
    r"|입니다|이다|있다|했다|한다",
    re.I,
)
_FILLER = re.compile(r"^(ok|okay|thanks|thank you|sure|yes|no|hi|hello|great|cool|got it|sounds good)\b[.!]*$", re.I)


def candidates(transcript: str, mode: str) -> list[tuple[str, str]]:
    """(sentence, type) pairs worth keeping from a transcript, in order: decisions, instructions and factual
    statements of at least four words, without their speaker labels. `seeds` keeps only first-person ones (what a
    speaker says of themselves), seed 003's "texture" memories; `statements` keeps every statement (what a user tells
    the assistant is a fact of the project unless it says otherwise), typed like the rest."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for raw in _SENTENCE.split(transcript):
        sentence = _SPEAKER.sub("", raw).strip().strip("-*• ").strip()
        words = sentence.split()
        if len(words) < 4 or len(sentence) > 500 or _FILLER.match(sentence) or sentence.endswith("?"):
            continue
        if mode == "seeds" and not re.search(r"\b(i|i'm|i've|my|me|we|our)\b|저는|제가|나는|내가", sentence, re.I):
            continue
        if _DECISION.search(sentence):
            kind = "decision"
        elif _INSTRUCTION.search(sentence):
            kind = "instruction"
        elif _FACT.search(sentence) or mode == "statements":
            kind = "fact"
        else:
            continue
        key = sentence.lower()
        if key not in seen:
            seen.add(key)
            out.append((sentence, kind))
    return out


def summary(sources: list[Any], tags: list[str]) -> str:
    """What replaces consolidated memories when the caller gives no synthesis: each source, marked and dated."""
    head = f"[{', '.join(tags)}] — " if tags else ""
    lines = [f"• {row['content']} ({row['type']}, {row['created_at'].date().isoformat()})" for row in sources]
    return f"{head}{len(sources)} memories consolidated\n\n" + "\n".join(lines)


def crystal(sections: list[Any], memories: list[Any], consolidations: list[Any], now: str) -> str:
    """An identity crystal assembled from the workspace: its non-empty working-memory sections, its most relevant
    memories and its consolidations (the reference server's template, offline)."""
    parts = [f"# Identity Crystal\n\nGenerated: {now}"]
    filled = [s for s in sections if s["content"].strip()]
    if filled:
        parts.append("## Working Memory\n\n" + "\n\n".join(f"### {s['heading']}\n{s['content']}" for s in filled))
    if memories:
        blocks = "\n\n".join(f"**{m['id']}** ({m['type']})\n{m['content']}" for m in memories)
        parts.append(f"---\n## Core Memories (top {len(memories)} by relevance)\n\n{blocks}")
    if consolidations:
        blocks = "\n\n".join(f"**{c['id']}**\n{c['content']}" for c in consolidations)
        parts.append(f"---\n## Consolidated Patterns\n\n{blocks}")
    parts.append(
        f"---\nSources: {len(filled)} working memory sections, {len(memories)} memories, "
        f"{len(consolidations)} consolidations"
    )
    return "\n\n".join(parts)


# --- with a language model (memento_shared.llm), when one is configured -------------------------------------------
CONSOLIDATE_SYSTEM = (
    "You consolidate an AI agent's related memories into one. Write a faithful synthesis of the notes you are given, "
    "keeping every concrete fact (names, numbers, dates, decisions) and dropping repetition. Plain text, at most two "
    "short paragraphs, no preamble."
)
EXTRACT_SYSTEM = (
    "You extract durable memories from a conversation transcript for an AI agent. Return only a JSON array of objects "
    '{"content": "<one standalone statement>", "type": "fact|decision|observation|instruction", "tags": ["..."]}. '
    "Keep facts, decisions and instructions worth remembering in later sessions; skip small talk and anything the "
    "existing memories already say."
)
SEEDS = "Return at most 3, about the people and their preferences, relationships and feelings."
CRYSTAL_SYSTEM = (
    "You write an AI agent's identity crystal: a first-person prose reflection on who it is, what it cares about, what "
    "it is working on and what it has learned, drawn only from the material given. At most 400 words, no headings."
)
TYPES = ("fact", "decision", "observation", "instruction")


def consolidate_prompt(sources: list[Any]) -> str:
    return "\n".join(f"- ({row['type']}) {row['content']}" for row in sources)


def extract_prompt(transcript: str, existing: list[str]) -> str:
    known = "\n".join(f"{i}. {text}" for i, text in enumerate(existing, 1)) or "(none)"
    return f"EXISTING MEMORIES (do not duplicate these):\n{known}\n\n---\n\nTRANSCRIPT:\n{transcript}"


def parse_extracted(text: str) -> list[tuple[str, str]] | None:
    """The model's JSON array as (content, type) pairs; None when it is not one (the offline path then answers)."""
    entries = json_array(text)
    if entries is None:
        return None
    out = []
    for entry in entries:
        content = entry.get("content") if isinstance(entry, dict) else None
        if isinstance(content, str) and content.strip():
            kind = entry.get("type") if entry.get("type") in TYPES else "observation"
            out.append((content.strip()[:2000], kind))
    return out
