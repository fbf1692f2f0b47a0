"""server.json, the entry for the official MCP registry, against the registry's published schema (vendored beside
this file, see mcp_registry/SOURCE.md), and against what the gateway really serves: its version, its profiles and
their tools, its protocol versions. tests/gateway/test_server_json.py connects to a gateway through the entry."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from urllib.parse import urlsplit

import jsonschema
import pytest

from memento_gateway.mcp import versions
from memento_gateway.mcp.methods import SERVER_INFO
from memento_shared.tools.registry import PROFILES, tools_for

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_FILE = Path(__file__).parent / "mcp_registry" / "server.schema.json"
SCHEMA_SHA256 = "d4c163f299ece68b7432f4e44c4108f2fdb663d99dc088c8344142e5b0a4b520"
PUBLISHER = "io.modelcontextprotocol.registry/publisher-provided"


def entry() -> dict:
    return json.loads((ROOT / "server.json").read_text())


def schema() -> dict:
    return json.loads(SCHEMA_FILE.read_text())


def problems(document: dict) -> list[str]:
    validator = jsonschema.Draft7Validator(schema(), format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]


def test_the_vendored_schema_is_the_published_file_unchanged():
    assert hashlib.sha256(SCHEMA_FILE.read_bytes()).hexdigest() == SCHEMA_SHA256
    jsonschema.Draft7Validator.check_schema(schema())


def test_server_json_is_valid_against_the_registry_schema_it_names():
    document = entry()
    assert document["$schema"] == schema()["$id"]
    assert problems(document) == []


def test_the_validation_refuses_what_the_registry_would():
    """The same validator finds each fault: the test above could not pass by validating nothing."""
    for change, where in [
        (lambda d: d.update(description="x" * 101), "description"),
        (lambda d: d.update(name="memento"), "name"),
        (lambda d: d["remotes"][0].update(type="websocket"), "remotes.0"),
        (lambda d: d["remotes"][0].update(url="memento.example.com/mcp"), "remotes.0"),
        (lambda d: d.pop("version"), ""),
    ]:
        document = copy.deepcopy(entry())
        change(document)
        found = problems(document)
        assert found and any(p.startswith(where) for p in found), (where, found)


def test_what_the_entry_says_is_what_the_gateway_serves():
    document = entry()
    assert document["version"] == SERVER_INFO["version"]
    assert urlsplit(document["$schema"]).scheme == "https"
    published = document["_meta"][PUBLISHER]
    assert published["protocolVersions"] == list(versions.ALL)
    assert published["profiles"] == {p: [spec.name for spec in tools_for((p,))] for p in PROFILES}
    for remote in document["remotes"]:
        assert remote["variables"]["profile"]["choices"] == [*PROFILES, "all"]
        assert remote["variables"]["profile"]["default"] == "fragments"
        assert {"host", "profile"} <= set(remote["variables"])
        (header,) = remote["headers"]
        assert header["name"] == "Authorization" and header["isSecret"] and not header["isRequired"]
    assert {urlsplit(r["url"]).path for r in document["remotes"]} == {"/mcp", "/sse"}


@pytest.mark.parametrize("field", ["description", "title"])
def test_short_fields_fit_the_registry(field):
    assert 1 <= len(entry()[field]) <= 100
