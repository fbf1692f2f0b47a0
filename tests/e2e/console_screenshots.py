"""Screenshots of the web console's main pages for docs/console/ (`python -m tests.e2e.console_screenshots`), and
the helpers the console's browser tests share: Debian's Chromium under Playwright, signing in, storing memories
through the gateway's MCP endpoint, and rows only an operator makes (API keys, a dead letter).

The script starts the whole system as `make run` does (the launcher, in a fresh data dir), stores a small example
workspace, takes the screenshots and stops everything with SIGINT."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import httpx

from memento_devtools.embedded import free_port, spawn
from memento_memory_api.repositories import api_keys
from memento_shared.db.rls import set_system
from tests.e2e.conftest import ACCESS_KEY, wait_for

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]  # fmt: skip
DOCS = Path(__file__).resolve().parents[2] / "docs" / "console"
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def launch(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)


# --- the gateway's MCP endpoint, as an agent would store things ---
def _message(response: httpx.Response) -> dict:
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]
        return json.loads(data[-1])
    return response.json()


def call_tool(base_url: str, key: str, workspace: str, tool: str, arguments: dict) -> dict:
    """One tool call in its own MCP session; the tool's structured result (failing the caller on a tool error)."""
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {key}", "X-Memento-Workspace": workspace}
    url = f"{base_url}/mcp?profile=all"
    with httpx.Client(headers=headers, trust_env=False, timeout=60) as http:
        params = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "console", "version": "1"},
        }
        opened = http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
        assert opened.status_code == 200, opened.text
        session = {"Mcp-Session-Id": opened.headers["mcp-session-id"]}
        http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
        result = _message(http.post(url, json=call, headers=session))["result"]
        http.delete(url, headers=session)
    body = result.get("structuredContent") or json.loads(result["content"][0]["text"])
    assert not result.get("isError"), body
    return body


def remember(base_url: str, key: str, workspace: str, content: str, **more) -> str:
    args = {"content": content, "topic": more.pop("topic", "console"), "type": more.pop("type", "fact"), **more}
    return call_tool(base_url, key, workspace, "remember", args)["id"]


# --- rows an operator makes with memento-admin, made here as the database owner ---
def owner_url(data_dir: Path, database_url: str) -> str:
    secrets = json.loads((data_dir / "secrets.json").read_text())
    parts = urlsplit(database_url)
    netloc = f"postgres:{secrets['postgres_owner_password']}@{parts.hostname}:{parts.port}"
    return parts._replace(netloc=netloc).geturl()


def as_system(url: str, work):
    """`work(conn)` in a transaction acting as system, run to completion on a thread of its own: Playwright's sync
    API keeps an event loop running on the test's thread, where asyncio.run() is refused."""

    async def run():
        conn = await asyncpg.connect(url)
        try:
            async with conn.transaction():
                await set_system(conn)
                return await work(conn)
        finally:
            await conn.close()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, run()).result()


def create_key(url: str, tenant: str, scopes: list[str], name: str = "console test") -> str:
    async def insert(conn):
        return await api_keys.insert(
            conn, tenant_id=tenant, name=name, workspaces=["*"], agents=["*"], scopes=scopes, profiles=[],
            expires_at=None,
        )  # fmt: skip

    return as_system(url, insert).key


def add_dead_letter(url: str, tenant: str, workspace: str) -> int:
    envelope = {"event_id": str(uuid.uuid4()), "event_type": "fragment.stored", "tenant_id": tenant,
                "workspace": workspace, "payload": json.dumps({"fragment_id": "missing"})}  # fmt: skip

    async def insert(conn):
        return await conn.fetchval(
            "INSERT INTO agent_memory.dead_letters (event_id, queue, tenant_id, workspace, event_type, payload,"
            " error, attempts) VALUES ($1, 'evaluator', $2, $3, $4, $5::jsonb, $6, 5) RETURNING id",
            uuid.UUID(envelope["event_id"]), tenant, workspace, envelope["event_type"], envelope["payload"],
            "TimeoutError: the scorer did not answer",
        )  # fmt: skip

    return as_system(url, insert)


def fetch(url: str, sql: str, *args) -> list[dict]:
    async def read(conn):
        return [dict(r) for r in await conn.fetch(sql, *args)]

    return as_system(url, read)


# --- the browser ---
def sign_in(page, base_url: str, key: str, workspace: str | None = None) -> None:
    page.goto(f"{base_url}/console/login")
    page.fill("#access_key", key)
    page.click("#sign-in")
    page.wait_for_selector("#memories")
    if workspace:
        switch_workspace(page, workspace)


def switch_workspace(page, workspace: str) -> None:
    page.fill("input[name=workspace]", workspace)
    page.click("header button:has-text('Switch')")
    page.wait_for_selector(f"h1 small:has-text('in {workspace}')")


# --- the screenshots ---
EXAMPLES = [
    ("The deploy pipeline releases blue-green on weekdays only", "deploy", "procedure"),
    ("Alice prefers dark mode and terse answers", "preferences", "preference"),
    ("Postgres 18 is the production database; pgvector 0.8 for embeddings", "stack", "fact"),
    ("Chose Valkey over Redis for licensing reasons", "stack", "decision"),
    ("Login failed with 'invalid_token' after the key was rotated", "auth", "error"),
    ("The billing service owns the invoices table", "ownership", "relation"),
]


def seed(base_url: str, db: str, workspace: str) -> dict:
    def call(tool: str, arguments: dict) -> dict:
        return call_tool(base_url, ACCESS_KEY, workspace, tool, arguments)

    ids = [remember(base_url, ACCESS_KEY, workspace, c, topic=t, type=k) for c, t, k in EXAMPLES]
    for a, b, relation in ((0, 2, "related"), (3, 2, "part_of"), (4, 0, "caused_by"), (5, 2, "related")):
        call("link", {"fromId": ids[a], "toId": ids[b], "relationType": relation})
    call("amend", {"id": ids[0], "content": EXAMPLES[0][0] + ", never Fridays"})
    call("memento_item_create", {"category": "active_work", "title": "Tune the alerting thresholds"})
    later = (datetime.now(UTC) + timedelta(days=7)).isoformat()
    call("memento_skip_add", {"item": "aurora alerts", "reason": "Kp index too low this week", "expires": later})
    document = "# Console\n\n## Sign-in\nAccess key or OAuth.\n\n## Pages\nMemories, documents, statistics.\n"
    entry = {"kind": "spec", "title": "Console design", "content": document, "canonicalKey": "console-design"}
    call("memory.commit", {"idempotencyKey": str(uuid.uuid4()), "entries": [entry]})
    add_dead_letter(db, "default", workspace)
    create_key(db, "default", ["read"], name="dashboard (read only)")
    return {"memories": ids}


def screenshots(base_url: str, db: str) -> list[Path]:
    from playwright.sync_api import sync_playwright

    workspace = "demo"
    ids = seed(base_url, db, workspace)["memories"]
    DOCS.mkdir(parents=True, exist_ok=True)
    shots = [
        ("login", "/console/login", False),
        ("memories", "/console/memories", True),
        ("search", "/console/memories?q=blue-green+deploy", True),
        ("memory", f"/console/memories/{ids[0]}", True),
        ("graph", f"/console/memories/{ids[2]}/graph", True),
        ("documents", "/console/documents", True),
        ("working", "/console/working", True),
        ("stats", "/console/stats", True),
        ("dead-letters", "/console/dead-letters", True),
        ("keys", "/console/keys", True),
    ]
    written = []
    with sync_playwright() as p:
        browser = launch(p)
        context = browser.new_context(viewport={"width": 1280, "height": 860})
        page = context.new_page()
        for name, path, signed_in in shots:
            if signed_in and "memento_console" not in {c["name"] for c in context.cookies()}:
                sign_in(page, base_url, ACCESS_KEY, workspace)
            page.goto(base_url + path)
            page.wait_for_selector("main")
            target = DOCS / f"{name}.png"
            page.screenshot(path=str(target), full_page=True)
            written.append(target)
        browser.close()
    return written


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="memento-console-") as tmp:
        data_dir = Path(tmp) / "data"
        env = {
            **os.environ,
            "MEMENTO_DATA_DIR": str(data_dir),
            "PORT": str(free_port()),
            "MEMENTO_ACCESS_KEY": ACCESS_KEY,
        }
        process = spawn([sys.executable, "-m", "memento_devtools.launcher"], log_path=Path(tmp) / "launcher.out",
                        env=env, death_signal=signal.SIGINT)  # fmt: skip
        try:
            run_file = data_dir / "run.json"
            info = wait_for(lambda: run_file.exists() and json.loads(run_file.read_text()), 180, "make run")
            base_url = info["mcp_url"].rsplit("/mcp", 1)[0]
            for path in screenshots(base_url, owner_url(data_dir, info["database_url"])):
                print(path)
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(90)


if __name__ == "__main__":
    main()
