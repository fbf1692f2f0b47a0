"""Consolidator event handlers: `consolidation.requested` runs the pipeline for the event's scope."""

from __future__ import annotations

from memento_consolidator.jobs import on_requested

HANDLERS = {"consolidation.requested": on_requested}
