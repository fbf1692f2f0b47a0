"""Importing this package binds every tool handler to its name."""

from memento_memory_api.tools import fragments  # noqa: F401
