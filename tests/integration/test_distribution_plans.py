"""Every statement the isolation sweep's tool calls send stays within one tenant, read from the plans PostgreSQL ran.

memory-api runs on a login role of its own (a member of the service role, so the same grants and row-level
security) with auto_explain loaded for its sessions: every statement's plan lands in the server log with the
session's process id. The principal each statement acts for is the last `agent_memory.enter()` of its session. For
the swept tenant's statements, every scan of a tenant table must be restricted by tenant_id: by the statement itself
(`tenant_id = $n`: what a distributed PostgreSQL routes to one shard) or by the row-level-security policy alone. The
first kind must be the rule and the second the exception: the statements relying on the policy alone are counted and
printed, and their number may not grow past POLICY_ONLY_BUDGET. Statements made as `system` (the outbox relay, L1's
rebuild) act for every tenant by design and are listed apart (docs/scaling.md: they run on every shard).

What this proves: no statement of a tenant's tool call reads or writes another tenant's rows, and which statements
would need the policy's tenant (rather than a parameter) to be routed. What it does not: it sees only the statements
these tool calls send (test_isolation_sweep.fill), not those of workers, the console or the CLI.
"""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path

from tests.fixtures.apps import memory_api_on
from tests.integration.test_isolation_sweep import fill

ROLE = "memento_explained"
# distinct statements of a tenant's calls whose tenant_id comes from the row-level-security policy alone (measured:
# see the printout, and docs/scaling.md); a change that adds one more must name the tenant in the statement instead
POLICY_ONLY_BUDGET = 8
_ENTRY = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \S+ \[(\d+)\] (\S*)@\S* LOG:  duration: [0-9.]+ ms  plan:$")
_STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
_ENTER = re.compile(r"agent_memory\.enter\((.*)\)", re.S)
_NOTHING = "= ANY ('{}'::"
_EXPLICIT = re.compile(r"tenant_id = (\$\d+|'[^']*'::text)|\(\$\d+ = tenant_id\)|tenant_id = ANY")


def plans_in(log: str, role: str) -> list[tuple[int, dict]]:
    """(process id, plan) of every auto_explain entry the role's sessions logged, in order."""
    found: list[tuple[int, dict]] = []
    lines = log.splitlines()
    i = 0
    while i < len(lines):
        match = _ENTRY.match(lines[i])
        i += 1
        if not match or match[2] != role:
            continue
        body = []
        while i < len(lines) and not _STAMP.match(lines[i]):
            body.append(lines[i])
            i += 1
        found.append((int(match[1]), json.loads("\n".join(body))))
    return found


def principal_of(plan: dict) -> list[str] | None:
    """The (tenant, workspace, agent, access) an enter() statement sets, from its literals or its parameters."""
    text = plan.get("Query Text", "")
    call = _ENTER.search(text)
    if call is None:
        return None
    literals = re.findall(r"E?'((?:[^']|'')*)'", call[1])
    if len(literals) >= 4:
        return [v.replace("''", "'") for v in literals[:4]]
    params = re.findall(r"\$\d+ = '((?:[^']|'')*)'", plan.get("Query Parameters", ""))
    return params[:4] if len(params) >= 4 else None


def scans(node: dict, tenant_tables: set[str]) -> list[str]:
    """The conditions of each scan of a tenant table in the plan (a bitmap scan's index conditions included). An
    INSERT's, UPDATE's or DELETE's target is no scan: the rows it writes are held to the policy's WITH CHECK (the
    tenant's own), and those an UPDATE or DELETE finds come from a scan below it, checked here."""
    found = []
    if node.get("Relation Name") in tenant_tables and node.get("Node Type") != "ModifyTable":
        conds = [node.get(k, "") for k in ("Index Cond", "Filter", "Recheck Cond", "Join Filter", "TID Cond")]
        conds += [child.get("Index Cond", "") for child in node.get("Plans", []) if "Index Name" in child]
        if not any(_NOTHING in c for c in conds):  # `id = ANY ('{}')`: the scan can read no row at all
            found.append(" ".join(conds))
    for child in node.get("Plans", []):
        found += scans(child, tenant_tables)
    return found


async def test_every_statement_of_a_tenants_calls_stays_within_the_tenant(servers, owner_pool, tenant):
    password = secrets.token_urlsafe(12)
    tenant_tables = {
        r["table_name"]
        for r in await owner_pool.fetch(
            "SELECT table_name FROM information_schema.columns"
            " WHERE table_schema = 'agent_memory' AND column_name = 'tenant_id'"
        )
    }
    log_path = Path(servers.pg.log_path)
    await owner_pool.execute(f"DROP ROLE IF EXISTS {ROLE}")
    await owner_pool.execute(f"CREATE ROLE {ROLE} LOGIN PASSWORD '{password}' IN ROLE memento_app")
    for setting, value in (
        ("session_preload_libraries", "auto_explain"),
        ("auto_explain.log_min_duration", "0"),
        ("auto_explain.log_format", "json"),
    ):
        await owner_pool.execute(f"ALTER ROLE {ROLE} SET {setting} = '{value}'")
    start = log_path.stat().st_size
    try:
        settings = servers.settings(DATABASE_URL=servers.pg.url(ROLE, password, "memento"))
        async with memory_api_on(settings) as api:
            await fill(api, tenant)
    finally:
        await owner_pool.execute(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{ROLE}'")
        await owner_pool.execute(f"DROP ROLE IF EXISTS {ROLE}")
    with open(log_path, encoding="utf-8", errors="replace") as handle:
        handle.seek(start)
        logged = plans_in(handle.read(), ROLE)

    acting: dict[int, list[str]] = {}
    explicit, policy_only, system, unrestricted = [], [], set(), []
    for pid, entry in logged:
        plan = entry["Plan"] if "Plan" in entry else entry
        principal = principal_of(entry)
        if principal is not None:
            acting[pid] = principal
            continue
        conds = scans(plan, tenant_tables)
        if not conds:
            continue
        who = acting.get(pid)
        text = " ".join(entry.get("Query Text", "").split())[:160]
        if who is not None and who[3] == "system":
            system.add(text)
            continue
        assert who is not None and who[0] == tenant, f"a tenant-table statement outside the swept tenant: {text}"
        if any("tenant_id" not in c for c in conds):
            unrestricted.append((text, conds))
        elif all(_EXPLICIT.search(c) for c in conds):
            explicit.append(text)
        else:
            policy_only.append(text)

    print(f"\n{len(set(explicit))} statements name the tenant; {len(set(policy_only))} rely on the policy alone:")
    for text in sorted(set(policy_only)):
        print("  policy only:", text)
    for text in sorted(system):
        print("  system:", text)
    assert logged and explicit, "auto_explain reported the calls' statements"
    assert unrestricted == [], "a scan of a tenant table not restricted by tenant_id"
    assert len(set(policy_only)) <= POLICY_ONLY_BUDGET, "name the tenant in the new statement (tenant_id = $n)"
