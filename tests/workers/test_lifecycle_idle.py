"""Seed 004's maintenance of idle sessions by the consolidator: a session nobody maintained since its last turn, idle
long enough, gets the run memory_run_maintenance makes; a session in use, or already maintained, is left alone."""

from __future__ import annotations

import json

from memento_consolidator.idle_sessions import maintain_idle
from memento_shared.worker import close_runtime, open_runtime


async def session(
    owner, tenant: str, name: str, idle_hours: float, maintained: bool = False, events_days: float = 3
) -> None:
    await owner.execute(
        "INSERT INTO agent_memory.session_meta (tenant_id, workspace, session_id, turns, last_turn_at, maintained_at)"
        " VALUES ($1, 'default', $2, 1, now() - make_interval(hours => $3),"
        " CASE WHEN $4 THEN now() ELSE NULL END)",
        tenant,
        name,
        float(idle_hours),
        maintained,
    )
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": f"{name} said something"}]}
    await owner.execute(
        "INSERT INTO agent_memory.session_events (tenant_id, workspace, session_id, turn_id, role, item, item_hash,"
        " created_at) VALUES ($1, 'default', $2, 't1', 'user', $3::jsonb, 'h', now() - make_interval(days => $4))",
        tenant,
        name,
        json.dumps(item),
        float(events_days),
    )


async def test_idle_sessions_are_maintained_and_busy_or_recent_ones_are_not(wenv, tenant):
    owner = wenv.owner
    await session(owner, tenant, "idle", idle_hours=5)
    await session(owner, tenant, "active", idle_hours=0.1)
    await session(owner, tenant, "done", idle_hours=5, maintained=True, events_days=0.1)
    # maintained before its events were old enough to compact: visited again once they are
    await session(owner, tenant, "early", idle_hours=30, maintained=True, events_days=2)
    rt = await open_runtime("consolidator", wenv.settings(), max_jobs=1)
    try:
        result = await maintain_idle(rt)
    finally:
        await close_runtime(rt)
    assert result["sessions"] >= 1 and result["failed"] == 0
    rows = {
        r["session_id"]: r
        for r in await owner.fetch(
            "SELECT m.session_id, m.maintained_at, m.abstract, (SELECT count(*) FROM agent_memory.session_events e"
            " WHERE e.tenant_id = m.tenant_id AND e.session_id = m.session_id) AS events"
            " FROM agent_memory.session_meta m WHERE m.tenant_id = $1",
            tenant,
        )
    }
    assert rows["idle"]["events"] == 0 and rows["idle"]["maintained_at"] is not None and rows["idle"]["abstract"]
    assert rows["active"]["events"] == 1 and rows["active"]["maintained_at"] is None
    assert rows["done"]["events"] == 1
    assert rows["early"]["events"] == 0
    archived = await owner.fetchval(
        "SELECT events FROM agent_memory.session_archives WHERE tenant_id = $1 AND session_id = 'idle'", tenant
    )
    assert archived == 1
