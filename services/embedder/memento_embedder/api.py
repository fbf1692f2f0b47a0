"""POST /v1/embeddings: OpenAI-compatible, plus `input_type` ("query" or "document", as Voyage and Jina name it).

memory-api calls this for query vectors so the model lives in one process (see memory-api embedding_client).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

MAX_INPUTS = 64
MAX_CHARS = 8000


async def embeddings(request: Request) -> JSONResponse:
    rt = request.app.state.runtime
    try:
        body = await request.json()
    except ValueError:
        return JSONResponse({"error": {"message": "body must be JSON", "type": "invalid_request_error"}}, 400)
    raw = body.get("input") if isinstance(body, dict) else None
    texts = [raw] if isinstance(raw, str) else raw
    input_type = body.get("input_type", "query") if isinstance(body, dict) else "query"
    if (
        not isinstance(texts, list)
        or not texts
        or len(texts) > MAX_INPUTS
        or not all(isinstance(t, str) and 0 < len(t) <= MAX_CHARS for t in texts)
    ):
        return JSONResponse(
            {
                "error": {
                    "message": f"input: 1..{MAX_INPUTS} non-empty strings of at most {MAX_CHARS} characters",
                    "type": "invalid_request_error",
                }
            },
            400,
        )
    if input_type not in ("query", "document"):
        return JSONResponse(
            {"error": {"message": "input_type: query or document", "type": "invalid_request_error"}}, 400
        )
    batcher = rt.state["batcher"]
    vectors = await batcher.embed_queries(texts)
    provider = batcher.provider
    return JSONResponse(
        {
            "object": "list",
            "model": provider.model,
            "data": [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)],
            "usage": {"prompt_tokens": 0, "total_tokens": 0},
        }
    )


ROUTES = [Route("/v1/embeddings", embeddings, methods=["POST"])]
