"""Seed 003's tools (the `protocol` profile). Importing the package binds its handlers (tools.registry)."""

from memento_memory_api.tools.protocol import memories, working  # noqa: F401
