"""Output schemas are what every client validates each result against: flat (cheap for the Python SDK's
jsonschema) but exactly as strict as the pydantic models they come from."""

from __future__ import annotations

import json

import jsonschema
import pytest

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


def test_context_schema_keeps_every_constraint_of_the_model():
    schema = TOOLS["context"].output_schema()
    good = {"coreMemory": [FRAGMENT], "workingMemory": [], "totalTokens": 12, "tokenBudget": 2000}
    jsonschema.validate(good, schema)
    TOOLS["context"].result_model.model_validate(good)  # and pydantic agrees
    for broken in (
        {**FRAGMENT, "accessed_at": 5},  # nullable string: null or a string, nothing else
        {**FRAGMENT, "similarity": "high"},
        {k: v for k, v in FRAGMENT.items() if k != "content"},  # required stays required
        {**FRAGMENT, "keywords": [1]},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**good, "coreMemory": [broken]}, schema)
