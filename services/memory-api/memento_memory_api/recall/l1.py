"""L1: Redis sets of fragment ids per (tenant, workspace, agent, keyword) (seed 000 §4.1).

L1 only proposes candidate ids; rows are always read back from Postgres under RLS, so a stale or foreign id in
Redis can never surface what the caller may not see. Redis errors skip L1 (§9.1). When Redis has lost its data
(the ready marker is gone), L1 is skipped until a background rebuild from Postgres has finished.

A write that failed (Redis unreachable while a fragment was stored, amended or forgotten) leaves L1 out of step,
and a Redis that comes back from its append-only file still holds the ready marker. So a failed write makes the
keeper distrust L1: this process skips it at once, and the keeper drops the marker as soon as Redis answers, which
makes every replica skip L1 until the rebuild from Postgres is done.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import asyncpg
from redis.asyncio import Redis
from redis.exceptions import RedisError

from memento_shared import background, redis_client
from memento_shared import l1 as layout
from memento_shared.db.cursor import fetch_batches
from memento_shared.db.rls import set_system

log = logging.getLogger(__name__)
REBUILD_BATCH = 5000
READ_PAUSE_S = 5.0


def _failed(event: str, exc: Exception, on_failure: Callable[[], None] | None) -> None:
    log.warning(event, extra={"error_type": type(exc).__name__})
    if on_failure is not None:
        on_failure()


async def index(
    redis: Redis | None,
    tenant_id: str,
    workspace: str,
    agent_id: str,
    fragment_id: str,
    keywords: list[str],
    score: float,
    replacing: Sequence[str] = (),
    on_failure: Callable[[], None] | None = None,
) -> None:
    """Put a fragment in its keyword sets (with its score); `replacing` are the keywords it held before an amend,
    dropped from the sets it no longer belongs to in the same round trip. `on_failure` is told when Redis errs."""
    dropped = [k for k in replacing if k not in keywords]
    if redis is None or not (keywords or dropped):
        return
    try:
        async with redis.pipeline(transaction=False) as pipe:
            for keyword in dropped:
                pipe.zrem(layout.key(tenant_id, workspace, agent_id, keyword), fragment_id)
            for keyword in keywords:
                pipe.zadd(layout.key(tenant_id, workspace, agent_id, keyword), {fragment_id: score})
            # REDIS_WAIT_REPLICAS: on the replicas too before the write is acknowledged (the sets share the tenant's
            # slot, so one WAIT covers them); a short count is a failed write, which has L1 rebuilt
            waited = redis_client.queue_wait(pipe, redis, layout.key(tenant_id, workspace, agent_id, ""))
            results = await pipe.execute()
        if waited:
            redis_client.check_wait(redis, results[-1])
    except (RedisError, OSError) as exc:
        _failed("l1.index_failed", exc, on_failure)


async def unindex(
    redis: Redis | None,
    tenant_id: str,
    workspace: str,
    agent_id: str,
    fragment_id: str,
    keywords: list[str],
    on_failure: Callable[[], None] | None = None,
) -> None:
    try:
        await layout.remove(redis, tenant_id, workspace, agent_id, fragment_id, keywords)
    except (RedisError, OSError) as exc:
        # a forgotten id left in a sorted set can take one of the few top places a one-keyword recall reads
        _failed("l1.unindex_failed", exc, on_failure)


async def lookup(
    redis: Redis | None,
    tenant_id: str,
    workspace: str,
    agents: list[str],
    keywords: list[str],
    limit: int,
    on_failure: Callable[[], None] | None = None,
) -> list[str] | None:
    """The best `limit` ids holding every keyword, per visible agent namespace; None when L1 is unavailable or
    incomplete. One keyword reads the top of its sorted set; several intersect them (smallest set first).
    `on_failure` is told when Redis errs."""
    if redis is None or not keywords:
        return None
    try:
        async with redis.pipeline(transaction=False) as pipe:
            pipe.exists(layout.READY_KEY)
            for agent in agents:
                keys = [layout.key(tenant_id, workspace, agent, k) for k in keywords]
                if len(keys) == 1:
                    pipe.zrevrange(keys[0], 0, limit - 1)
                else:
                    pipe.zinter(keys, aggregate="MAX")
            ready, *results = await pipe.execute()
    except (RedisError, OSError) as exc:
        _failed("l1.lookup_failed", exc, on_failure)
        return None
    if not ready:
        return None
    ids: list[str] = []
    for members in results:
        if len(keywords) > 1:
            members = list(reversed(members))[:limit]  # ZINTER answers in ascending score order
        ids.extend(m.decode() if isinstance(m, bytes) else m for m in members)
    return ids


# KEYS: generation, ready marker, wanted weights. ARGV: the generation the rebuild began at, the marker's value (its
# weights). 1 if marked: not if L1 was invalidated meanwhile, or other weights are wanted now.
MARK_READY = """
if (redis.call('GET', KEYS[1]) or '') ~= ARGV[1] then return 0 end
local wanted = redis.call('HGET', KEYS[3], 'weights')
if wanted and wanted ~= ARGV[2] then return 0 end
redis.call('SET', KEYS[2], ARGV[2])
return 1
"""


async def ensure_ready(
    redis: Redis | None,
    pool: asyncpg.Pool,
    w: layout.Weights = layout.DEFAULT_WEIGHTS,
    between_batches: Callable[[], Awaitable[bool]] | None = None,
) -> bool:
    """Rebuild L1 from Postgres (scored with weights `w`) unless the ready marker is there; one rebuild at a time
    across replicas. The old sets go first: they may hold what a lost removal left (a forgotten id, a keyword an
    amend dropped), which adding alone would keep. Marked ready only if nothing invalidated L1 meanwhile.
    `between_batches` is awaited after each batch (the keeper renews its claim: a rebuild can take minutes); False
    stops the rebuild (other weights are wanted now: it would hold the lock for nothing)."""
    if redis is None:
        return False
    try:
        if await redis.exists(layout.READY_KEY):
            return False
        if not await redis.set(layout.REBUILD_LOCK, "1", nx=True, ex=600):
            return False
    except (RedisError, OSError):
        return False
    try:
        generation = await begin_generation(redis)
        await redis.delete(*layout.LEGACY_READY_KEYS)
        await _clear(redis)
        if not await _rebuild(redis, pool, w, between_batches) or not await mark_ready(redis, generation, w):
            log.info("l1.rebuild_outdated")  # invalidated, or other weights wanted, while it ran: rebuilt later
            return False
        log.info("l1.rebuilt")
        return True
    except Exception as exc:
        log.warning("l1.rebuild_failed", extra={"error_type": type(exc).__name__})
        return False
    finally:
        try:
            await redis.delete(layout.REBUILD_LOCK)
        except (RedisError, OSError):
            pass


async def begin_generation(redis: Redis) -> str:
    """A rebuild's own generation: bumped at its start, so a later rebuild (whose clear empties this one's sets: the
    lock expired under a very long one) or an invalidation keeps this one from marking L1 ready."""
    return str(await redis.incr(layout.GENERATION_KEY))


async def mark_ready(redis: Redis, generation: str, w: layout.Weights) -> bool:
    """Set the ready marker unless L1 was invalidated since `generation` was read, or weights other than `w` are
    wanted now (a newer replica claimed them while this rebuild ran)."""
    keys = (layout.GENERATION_KEY, layout.READY_KEY, layout.WANTED_KEY)
    return bool(await redis.eval(MARK_READY, 3, *keys, generation, layout.ready_value(w)))


async def _clear(redis: Redis) -> None:
    async for batch in _batched(redis.scan_iter(match=layout.SETS_PATTERN, count=1000), 1000):
        await redis.unlink(*batch)


async def _batched(keys: AsyncIterator[str], size: int) -> AsyncIterator[list[str]]:
    batch: list[str] = []
    async for key in keys:
        batch.append(key)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


async def _rebuild(
    redis: Redis, pool: asyncpg.Pool, w: layout.Weights, between_batches: Callable[[], Awaitable[bool]] | None
) -> bool:
    """One sequential pass over fragments under one snapshot, through a cursor. Paging by id instead read the heap in
    id order, which for random ids is random order: at a million fragments it was bound by Postgres's reads, not
    by Redis. Every row of the snapshot is visited however updates move it; writes committed after it index
    themselves, and an id forgotten meanwhile is dropped by recall's read of Postgres."""
    async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        await set_system(conn)
        sql = "SELECT id, tenant_id, workspace, agent_id, keywords, importance, created_at FROM agent_memory.fragments"
        async for rows in fetch_batches(conn, sql, size=REBUILD_BATCH):
            async with redis.pipeline(transaction=False) as pipe:
                for row in rows:
                    score = layout.score(row["importance"], row["created_at"], w)
                    for keyword in row["keywords"]:
                        key = layout.key(row["tenant_id"], row["workspace"], row["agent_id"], keyword)
                        pipe.zadd(key, {row["id"]: score})
                await pipe.execute()
            if between_batches is not None and not await between_batches():
                return False
    return True


# KEYS: the wanted weights (a hash). ARGV: this replica's weights, its start time, the claim's lifetime (s). Returns
# the wanted weights. They are this replica's (and the claim is renewed) when nobody claims, the claim holds the same
# weights (it keeps the latest start among their replicas), or it was made by a replica started before this one.
CLAIM_WEIGHTS = """
local weights, started = unpack(redis.call('HMGET', KEYS[1], 'weights', 'started'))
if weights and weights ~= ARGV[1] and (tonumber(started) or 0) > tonumber(ARGV[2]) then return weights end
if weights ~= ARGV[1] or (tonumber(started) or 0) < tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], 'weights', ARGV[1], 'started', ARGV[2])
end
redis.call('EXPIRE', KEYS[1], ARGV[3])
return ARGV[1]
"""


class L1Keeper:
    """Checks the ready marker now and then and rebuilds when Redis came back empty, or when a write to L1 failed.

    L1's scores follow MEMORY_CONFIG.ranking's weights. Replicas configured differently (a rolling update, a canary)
    would take turns rebuilding, so one set of weights is wanted at a time: the newest-started replica's. Only
    replicas with the wanted weights rebuild (dropping a marker built with others), and a rebuild with other weights
    cannot mark L1 ready. Each pass renews the claim; when every replica of the wanted weights is gone it lapses
    and a remaining one takes it, and a newer replica takes it back after a lapse (Redis flushed, or away longer
    than the claim's lifetime). Any replica's start moves the claim to its weights: a replica of the older
    configuration that restarts during a canary moves L1 back to them (a rebuild) until a newer one starts.
    """

    def __init__(
        self,
        redis: Redis | None,
        pool: asyncpg.Pool,
        interval: float = 5.0,
        weights: layout.Weights = layout.DEFAULT_WEIGHTS,
    ) -> None:
        self.redis = redis
        self.pool = pool
        self.interval = interval
        self.weights = weights  # configured: what this replica rebuilds L1 with
        self.scoring = weights  # wanted (by the newest replica), as last seen: what this replica's writes score with
        self.out_of_step = False  # a write failed and the ready marker has not been dropped yet
        self.redis_away = False  # a write, and every marker drop since, failed: later writes need not try
        self._reads_paused_until = 0.0  # monotonic time: a read failed, so reads wait a little before trying again
        self._failures = 0  # writes lost so far: one lost while an invalidation is in flight needs another
        self.claim_ttl_s = max(30, int(interval * 6))  # several missed passes before the claim lapses
        self.started = f"{time.time():.6f}"  # wall clock: replicas on other machines compare it
        self._task: asyncio.Task[None] | None = None

    @property
    def readable(self) -> bool:
        """Whether a recall may read L1 now: in step, and no read has failed in the last READ_PAUSE_S."""
        return not self.out_of_step and time.monotonic() >= self._reads_paused_until

    def read_failed(self) -> None:
        """A read failed (Redis refused, or did not answer within REDIS_TIMEOUT_SECONDS): L2 answers recalls for a
        few seconds, rather than each of them paying for the failure again. Only reads: a write is tried until one is
        lost (ToolContext.l1_for_write), as a slow answer alone is no reason to rebuild L1."""
        self._reads_paused_until = time.monotonic() + READ_PAUSE_S

    def write_failed(self, tried: bool = True) -> None:
        """An L1 write was lost (`tried`: Redis failed it; else skipped while Redis is away): skip L1 here now, and
        have every replica skip it until it is rebuilt."""
        self.out_of_step = True
        self.redis_away = self.redis_away or tried
        self._failures += 1

    async def _invalidate(self) -> None:
        # Still unreachable: L1 stays skipped here, and the next pass tries again. A write lost while the invalidation
        # was on its way may have committed after it, so a rebuild begun in between would miss it: invalidate again.
        seen = self._failures
        dropped = await layout.invalidate(self.redis)
        self.redis_away = not dropped
        self.out_of_step = not dropped or self._failures != seen

    async def start(self, first_pass_timeout: float = 2.0) -> None:
        """Start checking; wait briefly for the first pass so a small store serves L1 from the first request."""
        if self.redis is None:
            return
        await self._claim_weights()  # at once, so replicas of other weights stop rebuilding before their next pass
        first_pass = asyncio.Event()
        self._task = asyncio.create_task(self._run(first_pass))
        try:
            async with asyncio.timeout(first_pass_timeout):
                await first_pass.wait()
        except TimeoutError:
            pass  # a large rebuild goes on in the background; recall uses L2 meanwhile

    async def _run(self, first_pass: asyncio.Event) -> None:
        while True:
            if await self.check():
                continue  # a write skipped while the drop was on its way: drop again now, before any rebuild
            first_pass.set()
            await asyncio.sleep(self.interval)

    async def check(self) -> bool:
        """One pass: drop the marker if a write was lost, and rebuild if L1 is not ready and this replica's weights
        are the wanted ones. True when another drop is owed at once."""
        if self.out_of_step:
            await self._invalidate()
            if self.out_of_step and not self.redis_away:
                return True
        if await self._claim_weights():
            await self._drop_marker_of_other_weights()
            await ensure_ready(self.redis, self.pool, self.weights, between_batches=self._claim_weights)
        return False

    async def _claim_weights(self) -> bool:
        ours = layout.ready_value(self.weights)
        try:
            wanted = await self.redis.eval(CLAIM_WEIGHTS, 1, layout.WANTED_KEY, ours, self.started, self.claim_ttl_s)
            wanted = wanted.decode() if isinstance(wanted, bytes) else wanted
            try:
                self.scoring = layout.parse_weights(wanted)  # so this replica's writes sort among the rebuilt scores
            except ValueError:  # a claim this version cannot read (a hand edit, a later format): drop it, claim anew
                log.warning("l1.unreadable_claim")
                await self.redis.delete(layout.WANTED_KEY)
                return False
            return wanted == ours
        except (RedisError, OSError):
            return False  # Redis away: nothing to rebuild into; the next pass asks again

    async def _drop_marker_of_other_weights(self) -> None:
        try:
            built = await self.redis.get(layout.READY_KEY)
            if built is not None and built.decode() != layout.ready_value(self.weights):
                log.info("l1.rebuild_for_new_weights", extra={"built_with": built.decode()})
                await layout.invalidate(self.redis)
        except (RedisError, OSError):
            pass  # Redis away: the loop's passes take over when it answers

    async def stop(self) -> None:
        await background.cancel(self._task)
