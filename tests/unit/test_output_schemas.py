"""Output schemas are what every client validates each result against: flat and cheap for the Python SDK's
jsonschema. Top-level fields are typed; list items are checked for their required fields and describe their fields'
types. The full pydantic models hold every tool test's results (tests/fixtures/apps.py)."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
from pydantic import ValidationError

from memento_shared.tools.registry import TOOLS

FRAGMENT = {
    "id": "frag-0123456789abcdef",
    "content": "the deploy script needs --force on staging",
    "topic": "deploy",
    "type": "procedure",
    "keywords": ["deploy", "staging"],
    "importance": 0.7,
    "ttl_tier": "warm",
    "is_anchor": False,
    "created_at": "2026-11-21T10:00:00+00:00",
    "accessed_at": None,
    "similarity": 0.83,
    "tier": "L3",
}


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_output_schema_is_flat_and_a_valid_schema(name):
    schema = TOOLS[name].output_schema()
    text = json.dumps(schema)
    assert "$ref" not in text and "$defs" not in text
    assert '"anyOf": [{"type"' not in text, "nullable unions are written as type lists"
    jsonschema.validators.validator_for(schema).check_schema(schema)


def test_context_schema_checks_the_shape_and_describes_item_fields():
    schema = TOOLS["context"].output_schema()
    good = {"coreMemory": [FRAGMENT], "workingMemory": [], "totalTokens": 12, "tokenBudget": 2000}
    jsonschema.validate(good, schema)
    TOOLS["context"].result_model.model_validate(good, strict=True)  # and pydantic agrees
    for broken in (
        {**good, "totalTokens": "12"},  # top-level fields keep their types
        {k: v for k, v in good.items() if k != "tokenBudget"},
        {**good, "coreMemory": [{k: v for k, v in FRAGMENT.items() if k != "content"}]},  # item fields stay required
        {**good, "coreMemory": ["frag-0123456789abcdef"]},  # items stay objects
        {**good, "coreMemory": FRAGMENT},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, schema)
    item = schema["properties"]["coreMemory"]["items"]
    assert "properties" not in item, "no per-field subschemas: the Python SDK descends into each, per item"
    for field_name, described in (
        ("accessed_at", "string or null"),
        ("keywords", "array of string"),
        ("similarity", "number or null"),
        ("is_anchor", "boolean"),
    ):
        assert f"{field_name}: {described};" in item["description"]


def _described_items(node):
    """Every list item in an output schema that describes its fields instead of listing subschemas."""
    if isinstance(node, dict):
        items = node.get("items")
        if isinstance(items, dict) and "Fields: " in items.get("description", ""):
            yield items
        for value in node.values():
            yield from _described_items(value)
    elif isinstance(node, list):
        for value in node:
            yield from _described_items(value)


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_every_item_field_of_the_model_is_described(name):
    """The description is generated from the model, so it names exactly the model's fields, each with a type."""
    definitions = TOOLS[name].result_model.model_json_schema().get("$defs", {}).values()
    for item in _described_items(TOOLS[name].output_schema()):
        described = re.findall(r"(\w+): [a-z]", item["description"].split("Fields: ", 1)[1])
        models = [d for d in definitions if sorted(d.get("required", [])) == sorted(item["required"])]
        assert any(described == list(d["properties"]) for d in models), (described, item["required"])


@pytest.mark.parametrize(("name", "lists"), [("recall", 1), ("reflect", 1), ("context", 1), ("graph_explore", 2)])
def test_lists_of_objects_describe_their_items(name, lists):
    assert len(list(_described_items(TOOLS[name].output_schema()))) == lists


def test_the_full_models_still_refuse_what_the_description_says_is_wrong():
    model = TOOLS["context"].result_model
    good = {"coreMemory": [FRAGMENT], "workingMemory": [], "totalTokens": 12, "tokenBudget": 2000}
    for broken in (
        {**FRAGMENT, "accessed_at": 5},
        {**FRAGMENT, "similarity": "high"},
        {**FRAGMENT, "keywords": [1]},
    ):
        with pytest.raises(ValidationError):
            model.model_validate({**good, "coreMemory": [broken]}, strict=True)
