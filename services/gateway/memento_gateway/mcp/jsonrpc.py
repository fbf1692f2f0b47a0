"""JSON-RPC 2.0 framing for MCP: parse a body, tell requests from notifications and responses, build errors.

Protocol errors are JSON-RPC errors (SPEC "Errors"); nothing here knows about tools or transports.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603
REQUEST_CANCELLED = -32800  # what a JSON-only POST answers when its request was cancelled meanwhile
# 2026-07-28: the range the specification reserves for its own errors
HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION = -32020, -32021, -32022

Kind = Literal["request", "notification", "response"]


class RpcError(Exception):
    """A JSON-RPC error for one message; `msg_id` is known once the message was readable."""

    def __init__(self, code: int, message: str, msg_id: Any = None, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.msg_id = msg_id
        self.data = data

    def response(self) -> dict[str, Any]:
        return error_response(self.msg_id, self.code, self.message, self.data)


@dataclass(frozen=True)
class Message:
    kind: Kind
    raw: dict[str, Any]

    @property
    def id(self) -> Any:
        return self.raw.get("id")

    @property
    def method(self) -> str:
        return self.raw.get("method", "")

    @property
    def params(self) -> dict[str, Any]:
        return self.raw.get("params") or {}


def error_response(msg_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": msg_id, "error": error}


def result_response(msg_id: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "result": result}


def notification(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def parse_body(body: bytes) -> Any:
    """The decoded JSON (one message or a batch list); RpcError(-32700) when it is not JSON."""
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise RpcError(PARSE_ERROR, "Parse error: the body is not valid JSON") from None
    except RecursionError:  # nesting deeper than the parser goes (a 500 before)
        raise RpcError(PARSE_ERROR, "Parse error: the JSON is nested too deeply") from None


def classify(value: Any) -> Message:
    """One JSON-RPC 2.0 message, or RpcError(-32600) naming what is wrong with it."""
    if not isinstance(value, dict):
        raise RpcError(INVALID_REQUEST, "Invalid Request: a JSON-RPC message must be an object")
    msg_id = value.get("id")
    valid_id = isinstance(msg_id, str | int) and not isinstance(msg_id, bool)
    reply_id = msg_id if valid_id else None
    if value.get("jsonrpc") != "2.0":
        raise RpcError(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"', reply_id)
    if "method" not in value:
        if "id" in value and ("result" in value or "error" in value):
            return Message("response", value)
        raise RpcError(INVALID_REQUEST, "Invalid Request: neither a request, a notification nor a response", reply_id)
    if not isinstance(value["method"], str) or not value["method"]:
        raise RpcError(INVALID_REQUEST, 'Invalid Request: "method" must be a non-empty string', reply_id)
    if "params" in value and not isinstance(value["params"], dict | None):
        raise RpcError(INVALID_REQUEST, 'Invalid Request: "params" must be an object', reply_id)
    if "id" not in value:
        return Message("notification", value)
    if not valid_id:
        raise RpcError(INVALID_REQUEST, 'Invalid Request: "id" must be a string or an integer')
    return Message("request", value)
