"""evaluator event handlers. Issue 5 builds them; until then the worker joins its queue and acknowledges events."""

from __future__ import annotations

HANDLERS: dict = {}
