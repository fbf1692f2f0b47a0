"""Credentials → Caller. Three kinds: the operator's MEMENTO_ACCESS_KEY (seed 000 §10.2; empty disables auth),
per-tenant API keys, and OAuth access tokens this gateway issued. Whatever the kind, what comes out is a
Principal; raw credentials never travel further than this module."""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Protocol

from memento_gateway.auth.api_keys import KEY_PREFIX, ApiKeys
from memento_shared import keys
from memento_shared.principal import SCOPES, Principal

OPERATOR = Principal(tenant_id="default", scopes=SCOPES, subject="operator")


@dataclass(frozen=True)
class Caller:
    principal: Principal
    credential: str  # operator | api_key | oauth | open (auth disabled)
    expires_at: float | None = None

    @property
    def identity(self) -> str:
        """Who, for rate limits and stream caps: one tenant's key, or the operator (its keys tagged by the tenant)."""
        return keys.identity(self.principal.tenant_id, self.principal.subject)


class AuthError(Exception):
    def __init__(self, description: str, *, missing: bool = False) -> None:
        super().__init__(description)
        self.description = description
        self.missing = missing


class TokenVerifier(Protocol):
    async def verify(self, token: str) -> Caller:
        """The caller an access token stands for; AuthError when it is bad, expired or for another resource."""


class Authenticator:
    def __init__(self, access_key: str, keys: ApiKeys, tokens: TokenVerifier | None = None) -> None:
        self.access_key = access_key
        self.keys = keys
        self.tokens = tokens

    async def authenticate(self, token: str | None) -> Caller:
        if token is None:
            if not self.access_key:
                return Caller(OPERATOR, "open")  # auth disabled: the gateway listens on loopback only
            raise AuthError("an access key or OAuth token is required", missing=True)
        if self.access_key and hmac.compare_digest(token.encode(), self.access_key.encode()):
            return Caller(OPERATOR, "operator")
        if token.startswith(KEY_PREFIX):
            principal = await self.keys.verify(token)
            if principal is None:
                raise AuthError("unknown, revoked or expired API key")
            return Caller(principal, "api_key")
        if self.tokens is not None and token.count(".") == 2:
            return await self.tokens.verify(token)
        raise AuthError("invalid access key")

    async def credential_principal(self, principal: Principal) -> Principal | None:
        """The principal a derived credential (session, refresh token) may still act as; None once revoked."""
        if principal.subject.startswith("key:"):
            return await self.keys.lookup(principal.subject.removeprefix("key:"))
        return principal if principal.subject == OPERATOR.subject else None
