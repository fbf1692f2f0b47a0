"""Seed 002's tools (the `simple` profile). Importing the package binds its handlers (tools.registry)."""

from memento_memory_api.tools.simple import handlers  # noqa: F401
