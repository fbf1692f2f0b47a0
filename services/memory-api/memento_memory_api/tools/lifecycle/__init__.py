"""Seed 004's tools (the `lifecycle` profile) and its sessions' tables (repository.py). Importing the package binds
its handlers (tools.registry)."""

from memento_memory_api.tools.lifecycle import maintenance, turn  # noqa: F401
