"""Importing this package binds every tool handler to its name."""

from memento_memory_api.tools import (  # noqa: F401
    documents,
    fragments,
    fragments_edit,
    fragments_maintenance,
    fragments_session,
    lifecycle,
    lifecycle_maintenance,
    protocol,
    protocol_working,
    simple,
)
