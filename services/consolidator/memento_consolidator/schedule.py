"""CONSOLIDATION_CRON (five fields, UTC: minute hour day-of-month month day-of-week; `*`, `*/n`, `a-b`, `a-b/n`
and lists) as an arq cron job. arq marks each scheduled run with a unique job id, so with any number of
consolidator replicas one of them runs it."""

from __future__ import annotations

from typing import Any

from arq.cron import CronJob, cron

RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))


def _field(text: str, low: int, high: int) -> set[int] | None:
    if text == "*":
        return None
    values: set[int] = set()
    for part in text.split(","):
        span, _, step = part.partition("/")
        if span == "*":
            start, end = low, high
        elif "-" in span:
            start, end = (int(v) for v in span.split("-", 1))
        else:
            start = end = int(span)
            if step:
                end = high
        if not (low <= start <= end <= high):
            raise ValueError(f"{part!r} is outside {low}-{high}")
        values.update(range(start, end + 1, int(step) if step else 1))
    return values


def parse(expression: str) -> dict[str, set[int] | None]:
    fields = expression.split()
    if len(fields) != 5:
        raise ValueError(f"CONSOLIDATION_CRON needs five fields, got {expression!r}")
    minute, hour, day, month, weekday = (_field(f, *r) for f, r in zip(fields, RANGES, strict=True))
    if weekday is not None:  # cron counts from Sunday = 0, arq (datetime.weekday) from Monday = 0
        weekday = {(d - 1) % 7 for d in weekday}
    return {"minute": minute, "hour": hour, "day": day, "month": month, "weekday": weekday}


def cron_jobs(expression: str, coroutine: Any, timeout_s: float, name: str = "consolidate_all") -> list[CronJob]:
    if not expression.strip():
        return []
    return [cron(coroutine, name=name, unique=True, timeout=timeout_s, **parse(expression))]
