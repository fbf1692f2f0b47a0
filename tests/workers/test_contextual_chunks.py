"""A canonical document's chunks embedded in the context of the whole document where the provider can (seed 001
Part 3): Voyage's /v1/contextualizedembeddings and Jina's late_chunking, through their wire formats on loopback
servers; a plain document's chunks one by one with their heading paths."""

from __future__ import annotations

import json
import uuid

import numpy as np
import pytest

from memento_embedder.batching import Batcher
from memento_embedder.handlers import embed_document_version
from memento_embedder.providers.jina import JinaProvider
from memento_embedder.providers.voyage import VoyageProvider
from memento_shared.worker import Runtime
from tests.fixtures.apps import memory_api_on
from tests.fixtures.loopback.embeddings import hashed_vector, jina_server, voyage_server

DOC = "# Guide\n\n## Install\n\nRun the installer twice.\n\n## Upgrade\n\nStop the service first.\n"


@pytest.mark.parametrize("vendor", ["voyage", "jina"])
async def test_canonical_chunks_are_embedded_in_context(wenv, tenant, vendor):
    owner = wenv.owner
    profile, dimension = await owner.fetchrow(
        "SELECT id, dimension FROM agent_memory.embedding_profiles WHERE status = 'active'"
    )
    async with memory_api_on(wenv.settings()) as api:
        upsert = {"canonicalKey": "guide", "docClass": "feature_spec", "title": "Guide", "contentMarkdown": DOC,
                  "idempotencyKey": str(uuid.uuid4())}  # fmt: skip
        item = (await api.call("canonical.upsert", upsert, tenant=tenant))["result"]["itemId"]
    await owner.execute("DELETE FROM agent_memory.chunk_embeddings WHERE item_id = $1", item)  # the worker's, if any
    server = voyage_server(dimension) if vendor == "voyage" else jina_server(dimension)
    with server:
        kind = VoyageProvider if vendor == "voyage" else JinaProvider
        provider = kind(model="m", dimension=dimension, api_key="k", base_url=server.url, timeout=10)
        rt = Runtime("embedder", wenv.settings(), wenv.app, None, {"batcher": Batcher(provider)})
        await embed_document_version({"payload": {"item_id": item, "version_num": 1}}, rt)
        await provider.aclose()
    [request] = server.requests
    own_spans = ["## Install\n\nRun the installer twice.", "## Upgrade\n\nStop the service first."]
    if vendor == "voyage":
        assert request.path == "/v1/contextualizedembeddings"
        assert request.body["inputs"][0][-2:] == own_spans and request.body["input_type"] == "document"
    else:
        assert request.path == "/v1/embeddings" and request.body["late_chunking"] is True
        assert request.body["input"][-2:] == own_spans and request.body["task"] == "retrieval.passage"
    rows = await owner.fetch(
        "SELECT chunk_index, embedding FROM agent_memory.chunk_embeddings WHERE item_id = $1 AND profile_id = $2"
        " ORDER BY chunk_index",
        item,
        profile,
    )
    assert len(rows) == len(request.body["inputs"][0] if vendor == "voyage" else request.body["input"])
    if vendor == "voyage":  # the loopback mixes the document's words into each chunk's vector
        chunks = request.body["inputs"][0]
        expected = hashed_vector(f"{chunks[-1]} {' '.join(chunks)}", dimension)
        stored = np.asarray(json.loads(rows[-1]["embedding"]), dtype=np.float32)  # the owner pool reads text
        assert np.allclose(stored, expected, atol=1e-5)
