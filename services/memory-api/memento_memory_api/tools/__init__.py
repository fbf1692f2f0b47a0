"""The tool handlers, one package per dialect (the profiles of memento_shared.tools.registry): importing this package
binds every tool handler to its name. `registry.py` (name → handler) and `common.py` (what every dialect's handlers
share) belong to no dialect; the rows they write go through the one store (memento_memory_api.store)."""

from memento_memory_api.tools import documents, fragments, lifecycle, protocol, simple  # noqa: F401
