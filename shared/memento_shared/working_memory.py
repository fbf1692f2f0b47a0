"""Working memory's Redis layout (seed 000 §5.2, `remember` with scope "session"): one list per MCP session of a
tenant, each entry tagged with its workspace and agent. memory-api writes it and `context` reads it; the gateway
slides its expiry with the session's on every request and deletes it when the session ends, so working memory lives
exactly as long as its session. The key holds no workspace because the gateway must find it from the session
alone (one session may write in several workspaces); readers filter entries by workspace and agent."""

from __future__ import annotations


def key(tenant_id: str, session_id: str) -> str:
    return f"memento:wm:{{{tenant_id}}}:{session_id}"
