"""Who is calling: resolved by the gateway from a credential, forwarded to memory-api signed.

The header is `base64url(json).hex(hmac_sha256(secret, base64url(json)))`; memory-api refuses anything unsigned,
stale or tampered with, so a client can never present a principal of its own making.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from dataclasses import asdict, dataclass, field

HEADER = "X-Memento-Principal"
MAX_AGE_SECONDS = 300
SCOPES = ("read", "write", "admin")


@dataclass(frozen=True)
class Principal:
    tenant_id: str
    workspaces: tuple[str, ...] = ("*",)
    agents: tuple[str, ...] = ("*",)
    scopes: tuple[str, ...] = ("read", "write")
    profiles: tuple[str, ...] = ()
    workspace: str = "default"  # the workspace this request acts in
    subject: str = ""  # key id or OAuth client, for audit; never a secret
    issued_at: float = field(default_factory=time.time)

    def allows_agent(self, agent_id: str) -> bool:
        return "*" in self.agents or agent_id in self.agents

    def allows_workspace(self, workspace: str) -> bool:
        return "*" in self.workspaces or workspace in self.workspaces

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes or "admin" in self.scopes


class PrincipalError(Exception):
    pass


def _sign(secret: str, body: str) -> str:
    return hmac.new(secret.encode(), body.encode(), hashlib.sha256).hexdigest()


def encode_principal(principal: Principal, secret: str) -> str:
    if not secret:
        raise PrincipalError("MEMENTO_INTERNAL_SECRET is not set")
    body = base64.urlsafe_b64encode(json.dumps(asdict(principal), separators=(",", ":")).encode()).decode()
    return f"{body}.{_sign(secret, body)}"


def decode_principal(header: str | None, secret: str, *, now: float | None = None) -> Principal:
    if not header or "." not in header:
        raise PrincipalError("missing principal")
    if not secret:
        raise PrincipalError("MEMENTO_INTERNAL_SECRET is not set")
    body, signature = header.rsplit(".", 1)
    if not hmac.compare_digest(_sign(secret, body), signature):
        raise PrincipalError("bad principal signature")
    data = json.loads(base64.urlsafe_b64decode(body.encode()))
    principal = Principal(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})
    if abs((now or time.time()) - principal.issued_at) > MAX_AGE_SECONDS:
        raise PrincipalError("stale principal")
    return principal
