"""Seed 000's tools (the `fragments` profile). Importing the package binds its handlers (tools.registry)."""

from memento_memory_api.tools.fragments import edit, maintenance, remember_recall, session  # noqa: F401
