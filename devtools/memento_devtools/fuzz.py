"""Schema-driven fuzzing of the MCP tools (issue 31 item 1): arguments generated from each tool's published
`inputSchema`, valid ones and near-misses, sent through the gateway with the official client, and every answer
checked: a success, or a documented error code (naming the field for INVALID_PARAMETER); never a JSON-RPC internal
error, an HTTP 5xx or the text of a traceback; and a call that was invalid changes no row.

Generation is a seeded `random.Random`, not hypothesis: hypothesis-jsonschema (0.23.1, its latest) fails on every
schema with the hypothesis this project pins ("'many' object has no attribute 'more'"), and a run must be
reproducible from its seed, call by call, across an asynchronous client that hypothesis' shrinking cannot drive.
Near-misses are built from a valid example: a required field dropped, an unknown field added, a value of a type the
schema does not allow, a number or length just past its bound, NUL in a string, a 1 MB string.
Valid strings carry what a careful client must pass through unchanged: right-to-left marks, 4-byte characters,
Hangul, quotes and SQL- or path-looking text.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

# text a valid string may be made of, beyond ASCII letters: what storage, search and rendering must keep literally
EDGE_TEXT = [
    "\u200f",  # right-to-left mark
    "\u202e",  # right-to-left override
    "😀",  # 4-byte UTF-8
    "𝔘",  # 4-byte, mathematical
    "한국어",
    "ﷺ",
    "'; DROP TABLE fragments; --",
    '" OR 1=1 --',
    "../../etc/passwd",
    "%00",
    "\\u0000",
    "<script>alert(1)</script>",
    "$(rm -rf /)",
    "\t",
    "\n",
]
WORDS = ["redis", "deploy", "orders-api", "cache", "ERR_CONN_RESET", "caroline", "port 8080", "pg_hba.conf", "x"]
# a lone surrogate is not among them: the official client cannot encode one (UnicodeEncodeError before sending), so
# tests send it as a JSON escape over raw HTTP (tests/e2e/test_fuzz_tools.py)
MUTATIONS = ("drop_required", "unknown_field", "wrong_type", "past_bound", "nul", "huge")
HUGE = 1_000_000
# the outcomes a call may have; anything else is a failure
DOCUMENTED = {
    "INVALID_PARAMETER",
    "MEMORY_NOT_FOUND",
    "STORAGE_ERROR",
    "EMBEDDING_ERROR",
    "RESOURCE_BUSY",
    "UNAUTHORIZED",
    "FORBIDDEN",
    "PAYLOAD_TOO_LARGE",
    "RATE_LIMITED",
    "CONFLICT",
}


class Generator:
    """Values for a JSON schema (the subset pydantic publishes: objects, arrays, strings with lengths and patterns,
    numbers with bounds, enums, anyOf, $ref to $defs)."""

    def __init__(self, rng: random.Random, defs: dict[str, Any]) -> None:
        self.rng, self.defs = rng, defs

    def resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in schema:
            schema = self.defs[schema["$ref"].rsplit("/", 1)[-1]]
        return schema

    def value(self, schema: dict[str, Any], depth: int = 0) -> Any:
        schema = self.resolve(schema)
        rng = self.rng
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            return rng.choice(schema["enum"])
        if "anyOf" in schema:
            branches = [self.resolve(b) for b in schema["anyOf"]]
            real = [b for b in branches if b.get("type") != "null"]
            return self.value(rng.choice(real if real and rng.random() < 0.85 else branches), depth)
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = rng.choice(kind)
        if kind == "null":
            return None
        if kind == "boolean":
            return rng.random() < 0.5
        if kind in ("integer", "number"):
            low, high = bounds(schema)
            low = low if low is not None else -5
            high = high if high is not None else low + 100
            if kind == "integer":
                return rng.randint(int(low) + (1 if "exclusiveMinimum" in schema else 0), int(high))
            return round(rng.uniform(low, high), 3) if low < high else low
        if kind == "string":
            return self.string(schema)
        if kind == "array":
            items = schema.get("items", {"type": "string"})
            least = schema.get("minItems", 0)
            most = min(schema.get("maxItems", 4), least + 3)
            count = rng.randint(least, max(least, most)) if depth < 3 else least
            values = [self.value(items, depth + 1) for _ in range(count)]
            if schema.get("uniqueItems"):
                values = list({json.dumps(v, sort_keys=True): v for v in values}.values())
            return values
        if kind == "object" or "properties" in schema:
            return self.object(schema, depth)
        return rng.choice(["x", 1, True])

    def object(self, schema: dict[str, Any], depth: int = 0) -> dict[str, Any]:
        schema = self.resolve(schema)
        props, required = schema.get("properties", {}), set(schema.get("required", []))
        out = {}
        for name, sub in props.items():
            if name in required or (depth < 3 and self.rng.random() < 0.5):
                out[name] = self.value(sub, depth + 1)
        return out

    def string(self, schema: dict[str, Any]) -> str:
        rng = self.rng
        least, most = schema.get("minLength", 0), min(schema.get("maxLength", 80), 200)
        pattern = schema.get("pattern")
        if pattern and pattern not in (r"\S",):
            return pattern_string(pattern, rng, least, most)
        parts = []
        while sum(len(p) for p in parts) < max(least, rng.randint(1, 40)):
            parts.append(rng.choice(EDGE_TEXT) if rng.random() < 0.3 else rng.choice(WORDS))
        text = " ".join(parts)[:most].strip() or "x"
        return text if len(text) >= least else text + "x" * (least - len(text))


def bounds(schema: dict[str, Any]) -> tuple[float | None, float | None]:
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    return low, high


def pattern_string(pattern: str, rng: random.Random, least: int, most: int) -> str:
    """A string for the identifier-like patterns the contracts use (^[A-Za-z0-9_.:@-]{1,64}$ and kin): letters and
    digits from inside the class, of an allowed length."""
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    if "[0-9a-f" in pattern:  # a uuid
        return "-".join("".join(rng.choice("0123456789abcdef") for _ in range(n)) for n in (8, 4, 4, 4, 12))
    length = max(least, min(most, rng.randint(1, 12)))
    return "".join(rng.choice(alphabet) for _ in range(length))


def near_miss(generator: Generator, schema: dict[str, Any], valid: dict[str, Any], kind: str) -> tuple[dict, str]:
    """`valid` made invalid in the way `kind` says; returns the arguments and the field the error should name
    ("" when the mutation found nothing to change: the caller skips it)."""
    rng = generator.rng
    schema = generator.resolve(schema)
    props, required = schema.get("properties", {}), list(schema.get("required", []))
    args = json.loads(json.dumps(valid))
    strings = [k for k, v in args.items() if isinstance(v, str)]
    if kind == "drop_required" and required:
        name = rng.choice(required)
        args.pop(name, None)
        return args, name
    if kind == "unknown_field":
        args["zzUnknownField"] = "x"
        return args, "zzUnknownField"
    if kind == "wrong_type" and props:
        name = rng.choice(list(props))
        allowed = types_of(generator, props[name])
        for candidate in ([1, 2], {"a": 1}, "text", 12345, True, 1.5):
            if json_type(candidate) not in allowed and not (json_type(candidate) == "integer" and "number" in allowed):
                args[name] = candidate
                return args, name
        return args, ""
    if kind == "past_bound":
        for name, sub in rng.sample(list(props.items()), len(props)):
            sub = generator.resolve(sub)
            branch = next((generator.resolve(b) for b in sub.get("anyOf", [sub]) if generator.resolve(b).get("type")
                           in ("integer", "number", "string", "array")), None)  # fmt: skip
            if branch is None:
                continue
            low, high = bounds(branch)
            if branch["type"] in ("integer", "number") and high is not None:
                args[name] = high + 1
                return args, name
            if branch["type"] in ("integer", "number") and low is not None:
                args[name] = low - 1
                return args, name
            if branch["type"] == "string" and "maxLength" in branch and branch["maxLength"] < 100_000:
                args[name] = "y" * (branch["maxLength"] + 1)
                return args, name
            if branch["type"] == "array" and "maxItems" in branch and branch["maxItems"] < 1000:
                item = generator.value(branch.get("items", {"type": "string"}))
                args[name] = [item] * (branch["maxItems"] + 1)
                return args, name
        return args, ""
    if kind in ("nul", "surrogate", "huge") and strings:
        name = rng.choice(strings)
        if kind == "huge":
            args[name] = "z" * HUGE
        else:
            mark = "\x00" if kind == "nul" else "\ud800"
            args[name] = args[name][:3] + mark + args[name][3:]
        return args, name
    return args, ""


def types_of(generator: Generator, schema: dict[str, Any]) -> set[str]:
    schema = generator.resolve(schema)
    if "anyOf" in schema:
        return set().union(*(types_of(generator, b) for b in schema["anyOf"]))
    if "enum" in schema:
        return {json_type(v) for v in schema["enum"]}
    kind = schema.get("type", "object")
    return set(kind) if isinstance(kind, list) else {kind}


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


@dataclass
class Outcome:
    tool: str
    kind: str  # "valid" or a mutation
    answer: str  # "ok", an error code, "jsonrpc:<code>", "http:<status>", or what went wrong
    failure: str | None = None
    expected_field: str = ""


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.failure]

    def summary(self) -> dict[str, Any]:
        return {
            "calls": len(self.outcomes),
            "failures": len(self.failures),
            "answers": dict(Counter(o.answer for o in self.outcomes).most_common()),
            "by_kind": dict(Counter(o.kind for o in self.outcomes)),
        }


def judge(tool: str, kind: str, expected_field: str, result: Any, error_codes: dict[str, str]) -> Outcome:
    """One answer held to the rules (see the module's docstring). `result` is the client's CallToolResult, or the
    exception the call raised."""
    documented = DOCUMENTED | set(error_codes.values())
    invalid_codes = {"INVALID_PARAMETER", "PAYLOAD_TOO_LARGE", error_codes.get("INVALID_PARAMETER", "")}
    if isinstance(result, BaseException):
        code = getattr(getattr(result, "error", None), "code", None) or getattr(result, "code", None)
        text = f"{type(result).__name__}: {result}"
        status = getattr(getattr(result, "response", None), "status_code", None)
        if status is not None:
            answer = f"http:{status}"
            bad = status >= 500
        elif isinstance(code, int):
            answer = f"jsonrpc:{code}"
            bad = code == -32603 or code >= -32099 and code <= -32000 and kind == "valid"
        else:
            answer, bad = text[:80], True
        if "Traceback" in text:
            bad = True
        if kind == "valid" and answer.startswith("jsonrpc:-32602"):
            bad = True
        return Outcome(tool, kind, answer, text[:300] if bad else None, expected_field)
    body_text = result.content[0].text if result.content else ""
    if "Traceback" in body_text or 'File "' in body_text:
        return Outcome(tool, kind, "traceback", body_text[:300], expected_field)
    if not result.is_error:
        if kind != "valid":
            return Outcome(tool, kind, "ok", f"accepted a near-miss ({kind} on {expected_field!r})", expected_field)
        return Outcome(tool, kind, "ok")
    try:
        error = json.loads(body_text)["error"]
    except (ValueError, KeyError, TypeError):
        return Outcome(tool, kind, "unparsed", body_text[:300], expected_field)
    code = error.get("code")
    if code not in documented:
        return Outcome(tool, kind, str(code), f"undocumented code: {body_text[:200]}", expected_field)
    if code == "STORAGE_ERROR" and not error.get("retryable"):
        return Outcome(tool, kind, code, f"bad input answered as a store failure: {body_text[:200]}", expected_field)
    if kind != "valid":
        if code not in invalid_codes:
            return Outcome(tool, kind, code, f"near-miss answered {code}: {body_text[:200]}", expected_field)
        if code != "PAYLOAD_TOO_LARGE" and not error.get("field"):
            return Outcome(tool, kind, code, f"no field named: {body_text[:200]}", expected_field)
    elif code in invalid_codes and not error.get("field") and code != "PAYLOAD_TOO_LARGE":
        return Outcome(tool, kind, code, f"no field named: {body_text[:200]}", expected_field)
    return Outcome(tool, kind, code, None, expected_field)


# Tools whose valid calls start work that lands later (a consolidation, a maintenance run): left out of the valid
# calls, so that no row changes under a near-miss's count check. Their near-misses are still sent.
DEFERRED = {"memory_consolidate", "memento_consolidate", "memory_run_maintenance"}
# tables the workers write on their own (vectors, the outbox's relay, dead letters): not in the count check
WORKER_TABLES = {"fragment_embeddings", "chunk_embeddings", "embedding_profiles", "outbox", "dead_letters"}


async def row_counts(conn: Any) -> dict[str, int]:
    """Rows per table of the schema (the owner's view: every tenant), worker tables left out."""
    tables = [
        r["tablename"]
        for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'agent_memory' ORDER BY 1")
        if r["tablename"] not in WORKER_TABLES
    ]
    union = " UNION ALL ".join(f"SELECT '{t}' AS t, count(*) AS n FROM agent_memory.{t}" for t in tables)
    return {r["t"]: r["n"] for r in await conn.fetch(union)}


async def run(
    client: Any, tools: list[Any], examples: int, seed: int, owner: Any, report: Report | None = None
) -> Report:
    """`examples` valid calls and `examples` near-misses per tool (the mutations in turn). `tools` are the client's
    listed tools; `owner` a connection as the schema owner, for the row counts; error codes a dialect renames are
    read off memento_shared's contracts."""
    from memento_shared.tools.registry import TOOLS

    report = report or Report()
    rng = random.Random(seed)
    for tool in tools:
        schema = tool.input_schema or tool.inputSchema
        generator = Generator(rng, schema.get("$defs", {}))
        codes = TOOLS[tool.name].error_codes if tool.name in TOOLS else {}
        for n in range(examples):
            if tool.name not in DEFERRED:
                args = generator.object(schema)
                report.outcomes.append(judge(tool.name, "valid", "", await _call(client, tool.name, args), codes))
            kind = MUTATIONS[(n + rng.randrange(len(MUTATIONS))) % len(MUTATIONS)]
            args, name = near_miss(generator, schema, generator.object(schema), kind)
            if not name:
                continue
            before = await row_counts(owner)
            outcome = judge(tool.name, kind, name, await _call(client, tool.name, args), codes)
            after = await row_counts(owner)
            if before != after and not outcome.failure:
                changed = {
                    t: (before.get(t), after.get(t)) for t in set(before) | set(after) if before.get(t) != after.get(t)
                }
                outcome.failure = f"an invalid call changed rows: {changed}"
            report.outcomes.append(outcome)
    return report


async def _call(client: Any, name: str, args: dict[str, Any]) -> Any:
    try:
        return await client.call_tool(name, args)
    except Exception as exc:  # the client's JSON-RPC and HTTP errors are answers to judge, not crashes
        return exc
