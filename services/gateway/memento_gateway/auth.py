"""Credentials → Principal. Today: the operator's MEMENTO_ACCESS_KEY (seed 000 §10.2). Empty disables auth."""

from __future__ import annotations

import hmac
import re

from memento_shared.principal import SCOPES, Principal

WORKSPACE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class AuthError(Exception):
    pass


def bearer_token(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def resolve_principal(token: str | None, access_key: str, workspace: str) -> Principal:
    if access_key and (token is None or not hmac.compare_digest(token.encode(), access_key.encode())):
        raise AuthError("missing or invalid access key")
    # The operator key (or no auth at all, loopback only) acts for the single default tenant with every scope.
    return Principal(tenant_id="default", scopes=SCOPES, workspace=workspace, subject="access-key")
