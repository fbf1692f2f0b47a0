"""MCP prompts: the few requests a person makes of a memory server often enough to want them as slash commands.
Each one is built from a dialect's own tool, called here as a client would call it (same validation, same RLS
scope), and its answer is laid out as the prompt's message; nothing here queries the store by itself.

- `catch_up(topic)`: recall's fragments filed under the topic (or found for it as text when none is).
- `decisions(subject)`: recall's decisions about the subject.
- `changes_since(since, topic?)`: recall's fragments created since a date or an expression ("3 days ago").
- `document(key)`: canonical.get's latest version of a document, embedded as its resource.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memento_memory_api.context import ToolContext
from memento_memory_api.tools.registry import HANDLERS
from memento_shared.errors import invalid
from memento_shared.tools.registry import TOOLS

RESOURCE_PREFIX = "memento://items/"
RECALL_BUDGET = 2000  # tokens of memories a prompt carries: enough to work from, small beside a model's context
DOCUMENT_MAX_CHARS = 50_000  # a document longer than this is embedded cut, saying so
ARGUMENT_MAX_CHARS = 200


@dataclass(frozen=True)
class Argument:
    name: str
    description: str
    required: bool = True


@dataclass(frozen=True)
class Prompt:
    name: str
    title: str
    description: str
    arguments: tuple[Argument, ...]

    def listed(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "arguments": [
                {"name": a.name, "description": a.description, "required": a.required} for a in self.arguments
            ],
        }


PROMPTS = {
    p.name: p
    for p in (
        Prompt(
            "catch_up",
            "Catch me up",
            "Catch up on a topic from what Memento remembers about it",
            (Argument("topic", "A topic the memories are filed under, or any words for it"),),
        ),
        Prompt(
            "decisions",
            "What did we decide",
            "The decisions Memento remembers about a subject, to review them or act on them",
            (Argument("subject", "What the decisions were about: a topic or any words"),),
        ),
        Prompt(
            "changes_since",
            "What changed since",
            "What Memento learned since a date: new facts, decisions, errors and procedures",
            (
                Argument("since", 'An ISO date (2026-03-01) or words ("yesterday", "3 days ago", "last week")'),
                Argument("topic", "Only memories filed under this topic", required=False),
            ),
        ),
        Prompt(
            "document",
            "Brief me on a document",
            "A workspace document's latest version (a spec, plan or decision record), to summarise or work from",
            (Argument("key", 'The document\'s canonical key, e.g. "app" or "feature/auth"'),),
        ),
    )
}


def listed() -> dict[str, Any]:
    return {"prompts": [p.listed() for p in PROMPTS.values()]}


def prompt_named(name: Any) -> Prompt:
    if not isinstance(name, str) or name not in PROMPTS:
        raise invalid("name", f"unknown prompt {name!r}; prompts: {', '.join(PROMPTS)}")
    return PROMPTS[name]


def arguments_for(prompt: Prompt, given: Any) -> dict[str, str]:
    """The prompt's arguments, checked: strings of at most ARGUMENT_MAX_CHARS, the required ones present, no others."""
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise invalid("arguments", "must be an object of strings")
    known = {a.name for a in prompt.arguments}
    for name, value in given.items():
        if name not in known:
            raise invalid(f"arguments.{name}", f"is not an argument of {prompt.name} ({', '.join(sorted(known))})")
        if not isinstance(value, str) or not value.strip() or len(value) > ARGUMENT_MAX_CHARS:
            raise invalid(f"arguments.{name}", f"must be a non-blank string of at most {ARGUMENT_MAX_CHARS} characters")
    for argument in prompt.arguments:
        if argument.required and argument.name not in given:
            raise invalid(f"arguments.{argument.name}", "is required")
    return {name: value.strip() for name, value in given.items()}


async def tool(ctx: ToolContext, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A tool's answer, its arguments parsed by its own contract, as if the client had called it."""
    answer = await HANDLERS[name](ctx, TOOLS[name].parse(arguments))
    return answer if isinstance(answer, dict) else answer.result


def _listing(fragments: list[dict[str, Any]]) -> str:
    lines = []
    for f in fragments:
        day = (f.get("created_at") or "")[:10]
        lines.append(f"- [{f['type']}, {day}, topic {f['topic']}] {f['content']} (id {f['id']})")
    return "\n".join(lines)


def _message(text: str) -> dict[str, Any]:
    return {"role": "user", "content": {"type": "text", "text": text}}


async def _catch_up(ctx: ToolContext, args: dict[str, str]) -> tuple[str, list[dict[str, Any]]]:
    topic = args["topic"]
    found = await tool(ctx, "recall", {"topic": topic, "tokenBudget": RECALL_BUDGET})
    how = f"filed under the topic {topic!r}"
    if not found["fragments"]:
        found = await tool(ctx, "recall", {"text": topic, "tokenBudget": RECALL_BUDGET})
        how = f"found for {topic!r}"
    memories = found["fragments"]
    if not memories:
        text = f"Catch me up on {topic}. Memento remembers nothing about it yet: say so, and ask what I know."
    else:
        text = (
            f"Catch me up on {topic}. These are the {len(memories)} memories Memento holds {how}, most relevant "
            f"first:\n\n{_listing(memories)}\n\nSummarise where things stand: what is settled, what is still open, "
            "and what I should know before I continue. Cite memory ids for anything you rely on."
        )
    return f"Catch up on {topic}", [_message(text)]


async def _decisions(ctx: ToolContext, args: dict[str, str]) -> tuple[str, list[dict[str, Any]]]:
    subject = args["subject"]
    found = await tool(ctx, "recall", {"text": subject, "type": "decision", "tokenBudget": RECALL_BUDGET})
    memories = found["fragments"]
    if not memories:
        text = f"What did we decide about {subject}? Memento remembers no decision about it: say so."
    else:
        text = (
            f"What did we decide about {subject}? These are the decisions Memento remembers, most relevant first:"
            f"\n\n{_listing(memories)}\n\nList each decision that bears on {subject} with its date and reason. "
            "Point out any that contradict or replace one another, and which one stands."
        )
    return f"Decisions about {subject}", [_message(text)]


async def _changes_since(ctx: ToolContext, args: dict[str, str]) -> tuple[str, list[dict[str, Any]]]:
    since = args["since"]
    query: dict[str, Any] = {"timeRange": {"from": since}, "tokenBudget": RECALL_BUDGET}
    if "topic" in args:
        query["topic"] = args["topic"]
    memories = (await tool(ctx, "recall", query))["fragments"]
    memories.sort(key=lambda f: f.get("created_at") or "", reverse=True)
    where = f" about {args['topic']}" if "topic" in args else ""
    if not memories:
        text = f"What changed{where} since {since}? Memento learned nothing new{where} since then: say so."
    else:
        text = (
            f"What changed{where} since {since}? These are the {len(memories)} memories Memento stored since then, "
            f"newest first:\n\n{_listing(memories)}\n\nSummarise what changed, grouped by subject, decisions first."
        )
    return f"Changes{where} since {since}", [_message(text)]


async def _document(ctx: ToolContext, args: dict[str, str]) -> tuple[str, list[dict[str, Any]]]:
    found = await tool(ctx, "canonical.get", {"canonicalKey": args["key"]})
    content = found["contentMarkdown"]
    cut = len(content) > DOCUMENT_MAX_CHARS
    ask = (
        f"Brief me on the document {found['title']!r} ({found['canonicalKey']}, version {found['versionNum']}, "
        f"updated {found['updatedAt'][:10]}): its purpose, what it decides, and what it leaves open."
    )
    if cut:
        ask += f" Only its first {DOCUMENT_MAX_CHARS} characters are attached; read the resource for the rest."
    resource = {
        "uri": RESOURCE_PREFIX + found["itemId"],
        "mimeType": "text/markdown",
        "text": content[:DOCUMENT_MAX_CHARS],
    }
    return (
        f"Briefing on {found['title']}",
        [_message(ask), {"role": "user", "content": {"type": "resource", "resource": resource}}],
    )


RENDER = {"catch_up": _catch_up, "decisions": _decisions, "changes_since": _changes_since, "document": _document}


async def rendered(ctx: ToolContext, name: Any, given: Any) -> dict[str, Any]:
    """prompts/get's result: the prompt's description and messages."""
    prompt = prompt_named(name)
    description, messages = await RENDER[prompt.name](ctx, arguments_for(prompt, given))
    return {"description": description, "messages": messages}
