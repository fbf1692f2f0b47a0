"""JSON on the request path, through orjson: every tool call is decoded and encoded at each hop (memory-api's
answer, the gateway's MCP result holding it twice, the SSE frame), and the standard library's encoder was the
gateway's largest own cost on recall (13% of its CPU). Same JSON out: UTF-8 without escapes, keys in order."""

from __future__ import annotations

import json
from typing import Any

import orjson
from starlette.responses import JSONResponse

loads = orjson.loads


def dumps(value: Any) -> bytes:
    # default=str: what the standard encoder's callers passed for datetimes and UUIDs
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        # what a client's JSON can carry and orjson cannot write (a lone surrogate as a \u escape, an integer past
        # 64 bits): written escaped by the standard encoder, so the answer still goes out (a 500 before)
        return json.dumps(value, default=str, ensure_ascii=True).encode()


def dumps_str(value: Any) -> str:
    return dumps(value).decode()


class JSONBody(JSONResponse):
    """A JSONResponse rendered by orjson."""

    def render(self, content: Any) -> bytes:
        return dumps(content)
