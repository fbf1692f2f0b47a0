"""Seed 001's tools (the `documents` profile). Importing the package binds its handlers (tools.registry)."""

from memento_memory_api.tools.documents import handlers  # noqa: F401
