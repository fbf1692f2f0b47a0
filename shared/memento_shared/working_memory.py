"""Working memory's Redis layout (seed 000 §5.2, `remember` with scope "session"): one list per MCP session of a
tenant, each entry tagged with its workspace and agent. memory-api writes it and `context` reads it; the gateway
slides its expiry with the session's on every request and deletes it when the session ends, so working memory lives
exactly as long as its session. The key holds no workspace because the gateway must find it from the session
alone (one session may write in several workspaces); readers filter entries by workspace and agent."""

from __future__ import annotations

import json
from typing import Any

from memento_shared import keys, redis_client
from memento_shared.errors import unavailable

key = keys.working_memory  # (tenant, session id)


MAX_ENTRIES = 500  # per session; the oldest go first

# KEYS: the list. ARGV: the entry (JSON), its workspace, agent and content hash, max entries, ttl (s). Returns the id
# of the entry with that content already in the namespace, or of the one appended: one script, so two concurrent
# writes of the same content store it once. Only entries holding the hash's text are decoded: decoding all 500 on
# every append held Valkey, which serves every other command meanwhile, for milliseconds.
_APPEND = """
for _, raw in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  if string.find(raw, ARGV[4], 1, true) then
    local ok, e = pcall(cjson.decode, raw)
    if ok and e.workspace == ARGV[2] and e.agent_id == ARGV[3] and e.content_hash == ARGV[4] then
      redis.call('EXPIRE', KEYS[1], ARGV[6])
      return e.id
    end
  end
end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[5]), -1)
redis.call('EXPIRE', KEYS[1], ARGV[6])
return cjson.decode(ARGV[1]).id
"""


async def append(redis: Any, list_key: str, entry: dict[str, Any], ttl_s: int) -> str:
    """Store `entry` unless its content is already there for its workspace and agent; the id that holds it. With
    REDIS_WAIT_REPLICAS, only once that many replicas have it (else a retryable STORAGE_ERROR)."""
    async with redis.pipeline(transaction=False) as pipe:
        args = (json.dumps(entry), entry["workspace"], entry["agent_id"], entry["content_hash"], MAX_ENTRIES, ttl_s)
        pipe.eval(_APPEND, 1, list_key, *args)
        waited = redis_client.queue_wait(pipe, redis, list_key)
        results = await pipe.execute()
    if waited:
        try:
            redis_client.check_wait(redis, results[-1])
        except redis_client.NotReplicated:
            # kept on the primary but not confirmed on a replica: a retry stores nothing twice (same content, same id)
            raise unavailable("working memory: Redis did not confirm the write on a replica in time; retry") from None
    found = results[0]
    return found.decode() if isinstance(found, bytes) else found


async def entries(redis: Any, list_key: str, holding: list[str] | None = None) -> list[dict[str, Any]]:
    """Every entry of a session's list, oldest first (all workspaces and agents: filter with `visible`); with
    `holding`, only those whose JSON holds one of these strings (ids, say), decoded alone."""
    raws = await redis.lrange(list_key, 0, -1)
    if holding is not None:
        wanted = [s.encode() for s in holding]
        raws = [raw for raw in raws if any(w in raw for w in wanted)]
    return [json.loads(raw) for raw in raws]


def visible(entry: dict[str, Any], workspace: str, agents: list[str] | None) -> bool:
    """The entry belongs to the caller's workspace and to an agent namespace it reads (None: all of them)."""
    return entry.get("workspace") == workspace and (agents is None or entry.get("agent_id") in agents)
