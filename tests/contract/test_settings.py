"""Each service reads only its own settings: one class per service (memento_<service>.settings), composed from
memento_shared.settings' sections plus the variables only that service reads; no flat class for all five."""

from __future__ import annotations

import importlib
import itertools

import pytest
from pydantic import ValidationError
from pydantic_settings import BaseSettings

import memento_shared.settings as shared

SERVICES = {
    "memento_gateway": "GatewaySettings",
    "memento_memory_api": "MemoryApiSettings",
    "memento_embedder": "EmbedderSettings",
    "memento_evaluator": "EvaluatorSettings",
    "memento_consolidator": "ConsolidatorSettings",
}


def _settings_class(package: str) -> type[BaseSettings]:
    return getattr(importlib.import_module(f"{package}.settings"), SERVICES[package])


def _own_variables(cls: type[BaseSettings]) -> set[str]:
    """The variables the class itself declares, not one of the shared sections it inherits."""
    return {
        str(field.alias) for name, field in cls.model_fields.items() if name in vars(cls).get("__annotations__", {})
    }


def test_the_flat_settings_class_is_gone():
    assert not hasattr(shared, "Settings")


@pytest.mark.parametrize("package", SERVICES)
def test_a_service_class_inherits_only_shared_sections(package):
    cls = _settings_class(package)
    bases = [base for base in cls.__mro__[1:] if issubclass(base, shared.Section)]
    assert bases and all(base.__module__ == shared.__name__ for base in bases), bases


def test_no_variable_belongs_to_two_services_or_to_a_service_and_a_section():
    owned = {package: _own_variables(_settings_class(package)) for package in SERVICES}
    sections = {
        str(field.alias)
        for value in vars(shared).values()
        if isinstance(value, type) and issubclass(value, shared.Section)
        for field in value.model_fields.values()
    }
    for (one, mine), (other, theirs) in itertools.combinations(owned.items(), 2):
        assert not mine & theirs, (one, other, mine & theirs)
    for package, mine in owned.items():
        assert mine and not mine & sections, (package, mine & sections)


def test_a_service_neither_reads_nor_refuses_another_services_variable():
    gateway, memory_api = _settings_class("memento_gateway"), _settings_class("memento_memory_api")
    assert "memory_max_chars" not in gateway.model_fields
    gateway(MEMORY_MAX_CHARS="0")  # memory-api's variable, out of its range: not the gateway's concern
    with pytest.raises(ValidationError, match="MEMORY_MAX_CHARS"):
        memory_api(MEMORY_MAX_CHARS="0")
