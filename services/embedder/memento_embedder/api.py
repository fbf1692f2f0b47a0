"""POST /v1/embeddings: OpenAI-compatible, plus `input_type` ("query" or "document", as Voyage and Jina name it)
and `profile` (an embedding profile id; default the active one). The answer names the profile it used.

memory-api calls this for query vectors so the model lives in one process (see memory-api embedding_client). A
query vector only makes sense against vectors of the same profile: a caller searching profile X sends
`"profile": "X"`, so a cut-over between its profile lookup and this call cannot mix two vector spaces.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from memento_embedder.providers.base import ProviderError

MAX_INPUTS = 64
MAX_CHARS = 8000


def _error(message: str, status: int = 400, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind}}, status)


async def embeddings(request: Request) -> JSONResponse:
    rt = request.app.state.runtime
    try:
        body = await request.json()
    except ValueError:
        return _error("body must be JSON")
    if not isinstance(body, dict):
        return _error("body must be a JSON object")
    raw = body.get("input")
    texts = [raw] if isinstance(raw, str) else raw
    input_type = body.get("input_type", "query")
    profile = body.get("profile")
    if (
        not isinstance(texts, list)
        or not texts
        or len(texts) > MAX_INPUTS
        or not all(isinstance(t, str) and 0 < len(t) <= MAX_CHARS for t in texts)
    ):
        return _error(f"input: 1..{MAX_INPUTS} non-empty strings of at most {MAX_CHARS} characters")
    if input_type not in ("query", "document"):
        return _error("input_type: query or document")
    if profile is not None and not isinstance(profile, str):
        return _error("profile: an embedding profile id")
    registry = rt.state["registry"]
    try:
        profile = profile or await registry.active_id()
        batcher = await registry.batcher(profile)
        vectors = await batcher.embed(texts, input_type)
    except ProviderError as exc:
        status = 404 if "does not exist" in str(exc) else 503
        headers = {"Retry-After": str(int(exc.retry_after))} if exc.retry_after else None
        response = _error(str(exc), status, "provider_error")
        if headers:
            response.headers.update(headers)
        return response
    return JSONResponse(
        {
            "object": "list",
            "model": batcher.provider.model,
            "profile": profile,
            "data": [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)],
            "usage": {"prompt_tokens": 0, "total_tokens": 0},
        }
    )


ROUTES = [Route("/v1/embeddings", embeddings, methods=["POST"])]
