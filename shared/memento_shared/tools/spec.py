"""ToolSpec: the contract of one MCP tool (name, schemas, annotations, profile). No behaviour lives here."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from memento_shared.errors import MementoError, invalid

# What a write's answer and a search's answer say about meaning search (issue 47; docs/fresh-writes.md)
INDEXED = (
    "True when its vector is already in the index: every reader finds it by meaning. False: the writer's own searches "
    "still rank it by meaning at once; other principals find it by its words until the embedder writes its vector"
)
PARTIAL = (
    '"partial" when meaning search left something out (no embedding model reachable, or a fresh row of the caller\'s '
    "that could not be embedded in time): those rows were found by their words only. Absent otherwise"
)


class Args(BaseModel):
    """Base for tool arguments: strict types, unknown fields refused (a typo must not be silently ignored)."""

    model_config = ConfigDict(extra="forbid", strict=True)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    args_model: type[Args]
    result_model: type[BaseModel]
    profile: str
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    scope: str = "write"  # credential scope needed: read, write or admin
    reports_progress: bool = False  # its work reports steps on the call's progress channel (memento_shared.progress)
    extra: dict[str, Any] = field(default_factory=dict)
    # a dialect whose clients expect other error codes (seed 004's) names them: SPEC code -> the dialect's
    error_codes: dict[str, str] = field(default_factory=dict)
    # a list argument whose items the tool checks one by one (parse_entry), answering each: batch_remember's
    entries: str | None = None

    def error_body(self, body: dict[str, Any]) -> dict[str, Any]:
        """An `{"error": {...}}` body with its code in this tool's dialect."""
        code = body["error"].get("code")
        if code in self.error_codes:
            body = {"error": {**body["error"], "code": self.error_codes[code]}}
        return body

    # Built once per model and shared (read-only): tools/list answers every new session, and pydantic builds a
    # schema in milliseconds.
    def input_schema(self) -> dict[str, Any]:
        return _input_schema(self.args_model)

    def output_schema(self) -> dict[str, Any]:
        return _output_schema(self.result_model)

    def annotations(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "readOnlyHint": self.read_only,
            "destructiveHint": self.destructive,
            "idempotentHint": self.idempotent,
            "openWorldHint": False,
        }

    def parse(self, arguments: dict[str, Any] | None) -> Args:
        """Validate arguments; the first problem becomes INVALID_PARAMETER naming the field."""
        arguments = arguments or {}
        _refuse_unstorable({k: v for k, v in arguments.items() if k != self.entries}, "")
        try:
            return self.args_model.model_validate(arguments)
        except ValidationError as exc:
            raise _to_invalid(exc) from None


def parse_entry(model: type[Args], entry: Any, path: str) -> Args:
    """One entry of a tool's `entries` list, checked as parse checks arguments; errors name `path`.field."""
    _refuse_unstorable(entry, path)
    try:
        return model.model_validate(entry)
    except ValidationError as exc:
        raise _to_invalid(exc, path) from None


@functools.cache
def _input_schema(model: type[BaseModel]) -> dict[str, Any]:
    return _clean_schema(model.model_json_schema())


@functools.cache
def _output_schema(model: type[BaseModel]) -> dict[str, Any]:
    return _compact_schema(model.model_json_schema())


def _to_invalid(exc: ValidationError, path: str = "") -> MementoError:
    err = exc.errors(include_url=False)[0]
    field_name = ".".join([path, *(str(p) for p in err["loc"])] if path else [str(p) for p in err["loc"]])
    field_name = field_name or "arguments"
    kind = err["type"]
    if kind == "missing":
        message = "is required"
    elif kind == "extra_forbidden":
        message = "is not a known parameter"
    elif kind == "literal_error":
        message = f"must be one of {err['ctx']['expected']}"
    else:
        message = err["msg"][0].lower() + err["msg"][1:]
    return invalid(field_name, message)


# Text Postgres cannot store (NUL) or that is not Unicode text at all (a lone surrogate, which a JSON \u escape can
# carry): no call holding it can succeed, so it is refused as the argument it is, before anything is written.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _refuse_unstorable(value: Any, path: str, pattern: re.Pattern[str] = _UNSTORABLE) -> None:
    if isinstance(value, str):
        if pattern.search(value):
            raise invalid(path or "arguments", "must not contain NUL characters or unpaired surrogates")
    elif isinstance(value, dict):
        for key, item in value.items():
            _refuse_unstorable(item, f"{path}.{key}" if path else str(key), pattern)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _refuse_unstorable(item, f"{path}.{index}", pattern)


def refuse_unencodable(arguments: Any) -> None:
    """What cannot even be sent on as UTF-8 (a lone surrogate, which a JSON escape can carry) refused where it
    arrives, naming its field: the gateway checks this before forwarding, memory-api the rest (parse)."""
    _refuse_unstorable(arguments, "", _SURROGATE)


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Inline $defs-free schemas keep clients simple; drop pydantic's titles noise on properties."""
    schema = dict(schema)
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return schema


def _compact_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """An output schema that is cheap to validate: clients (the official SDKs among them) check every result
    against it, and with pydantic's `$ref`s and `anyOf: [{type: X}, {type: null}]` the Python SDK spent longer
    validating a `context` answer than the server spent producing it. Written flat: `$ref`s inlined, nullable unions
    as `type: [X, "null"]`, titles and defaults dropped.

    The items of a list keep their type and required fields, and carry their fields' types as a description rather
    than as per-field subschemas: the Python SDK's jsonschema descends into every field of every item, which cost
    ~10 ms of the client's CPU on a 50-fragment recall and ~27 ms on a 126-fragment context, more than the whole
    call took at memory-api. The server's results are held to the full pydantic models in the test suite."""
    defs = schema.get("$defs", {})

    def compact(node: Any) -> Any:
        if isinstance(node, list):
            return [compact(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            return compact(defs[node["$ref"].rsplit("/", 1)[-1]])
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in ("title", "default", "$defs"):
                continue
            # property names are data, not keywords: a field may well be called "type" or "title"
            out[key] = {k: compact(v) for k, v in value.items()} if key == "properties" else compact(value)
        branches = out.get("anyOf")
        if branches and all(set(b) == {"type"} and isinstance(b["type"], str) for b in branches):
            del out["anyOf"]
            out["type"] = [b["type"] for b in branches]
        if isinstance(out.get("items"), dict) and "properties" in out["items"]:
            out["items"] = _described_item(out["items"])
        return out

    return compact(schema)


def _described_item(item: dict[str, Any]) -> dict[str, Any]:
    fields = "; ".join(f"{name}: {_type_text(sub)}" for name, sub in item["properties"].items())
    lead = f"{item['description']} " if "description" in item else ""
    described = {k: v for k, v in item.items() if k != "properties"}
    described["description"] = f"{lead}Fields: {fields}."
    return described


def _type_text(node: dict[str, Any]) -> str:
    kind = node.get("type", "any")
    text = " or ".join(kind) if isinstance(kind, list) else kind
    if kind == "array" and isinstance(node.get("items"), dict):
        text = f"array of {_type_text(node['items'])}"
    return text
