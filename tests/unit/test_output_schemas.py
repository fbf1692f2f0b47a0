"""Output schemas are what every client validates each result against: flat and cheap for the Python SDK's
jsonschema. Top-level fields are typed; list items are checked for their required fields and describe their fields'
types. The full pydantic models hold every tool test's results (tests/fixtures/apps.py)."""

from __future__ import annotations

import json

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


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_every_item_field_of_the_model_is_described(name):
    """The description is generated from the model, so it cannot drift from what the server returns."""
    model_schema = TOOLS[name].result_model.model_json_schema()
    described = json.dumps(TOOLS[name].output_schema())
    for definition in model_schema.get("$defs", {}).values():
        for field_name in definition.get("properties", {}):
            assert f"{field_name}: " in described or f'"{field_name}"' in described


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
