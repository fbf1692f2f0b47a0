"""The OAuth 2.0 authorization server behind the MCP SDK's handlers (`mcp.server.auth`): they parse and check
requests (PKCE S256, redirect URIs, client authentication, grant types); this provider keeps the state in Redis,
binds every grant to the principal of the access key typed on the login page, and mints the tokens.

Access tokens are short-lived ES256 JWTs for exactly this resource (RFC 8707 audience); refresh tokens are
opaque, rotated on every use, and re-checked against the key they came from.
"""

from __future__ import annotations

import secrets
import time
import uuid
from dataclasses import asdict
from typing import Any
from urllib.parse import urlencode, urlsplit

from jose import ExpiredSignatureError, JWTError
from jose.exceptions import JWTClaimsError
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    RefreshToken,
    RegistrationError,
    TokenError,
    construct_redirect_uri,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from memento_gateway.auth.authenticator import Authenticator, AuthError, Caller
from memento_gateway.edge import LOOPBACK_HOSTS, Edge
from memento_gateway.oauth.cimd import ClientDocuments, Refused, is_document_id
from memento_gateway.oauth.signing import Signer
from memento_gateway.oauth.store import CODE_TTL_S, OAuthStore
from memento_gateway.settings import GatewaySettings
from memento_shared.principal import Principal

BLOCKED_REDIRECT_SCHEMES = {"javascript", "data", "file", "vbscript", "about"}


class GrantCode(AuthorizationCode):
    principal: dict[str, Any]


class GrantRefresh(RefreshToken):
    principal: dict[str, Any]
    family: str


def same_resource(requested: str, edge: Edge) -> bool:
    """RFC 8707: this MCP endpoint, whatever its query string (`?profile=`) or trailing slash."""
    ours, theirs = urlsplit(edge.resource_url), urlsplit(requested)
    return (theirs.scheme.lower(), theirs.netloc.lower(), theirs.path.rstrip("/")) == (
        ours.scheme.lower(),
        ours.netloc.lower(),
        ours.path.rstrip("/"),
    )


class MementoOAuthProvider:
    def __init__(self, edge: Edge, settings: GatewaySettings) -> None:
        self.edge = edge
        self.access_ttl = settings.oauth_access_token_s
        self.store: OAuthStore
        self.signer: Signer
        self.auth: Authenticator
        self.documents: ClientDocuments | None = None  # None: Client ID Metadata Documents switched off

    def start(
        self, store: OAuthStore, signer: Signer, auth: Authenticator, documents: ClientDocuments | None = None
    ) -> None:
        """Late binding: the SDK's routes are built with the app, Redis and the key exist from the lifespan on."""
        self.store, self.signer, self.auth, self.documents = store, signer, auth, documents
        auth.tokens = self

    # --- clients: registered (RFC 7591), or described by their metadata document (oauth/cimd.py) ---
    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        if is_document_id(client_id):
            return await self.document_client(client_id)
        record = await self.store.get_client(client_id) if 0 < len(client_id) <= 64 else None
        return OAuthClientInformationFull.model_validate(record) if record else None

    async def document_client(self, url: str) -> OAuthClientInformationFull | None:
        """The client a metadata document describes; None when documents are off or this one is refused."""
        if self.documents is None:
            return None
        try:
            return await self.documents.client(url)
        except Refused:
            return None

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        for uri in client_info.redirect_uris or []:
            if uri.scheme.lower() in BLOCKED_REDIRECT_SCHEMES or uri.fragment:
                raise RegistrationError("invalid_redirect_uri", f"redirect URI {uri} is not allowed")
        await self.store.put_client(client_info.client_id, client_info.model_dump(mode="json", exclude_none=True))

    # --- authorization: park the request, send the user to the login page ---
    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        if params.resource is not None and not same_resource(params.resource, self.edge):
            raise AuthorizeError("invalid_target", f"this server issues tokens for {self.edge.resource_url} only")
        redirect_host = urlsplit(str(params.redirect_uri)).hostname or ""
        request_id = await self.store.put_pending(
            {
                "client_id": client.client_id,
                "client_name": client.client_name or client.client_id,
                # the host vouching for the name (its metadata document's); none for a self-registered client
                "client_host": urlsplit(client.client_id).hostname if is_document_id(client.client_id) else None,
                "redirect_host": redirect_host,
                "loopback_redirect": redirect_host in LOOPBACK_HOSTS or redirect_host.strip("[]") in LOOPBACK_HOSTS,
                "params": params.model_dump(mode="json"),
            }
        )
        return f"{self.edge.public_url}/oauth/login?{urlencode({'request': request_id})}"

    async def grant(self, pending: dict[str, Any], caller: Caller) -> str | None:
        """After the login page accepted an access key: the code bound to its principal, in the redirect URL.
        None when the key allows none of the requested scopes."""
        params = AuthorizationParams.model_validate(pending["params"])
        allowed = [s for s in params.scopes or caller.principal.scopes if caller.principal.has_scope(s)]
        if not allowed:
            return None
        code = secrets.token_urlsafe(32)
        principal = asdict(caller.principal)
        principal["scopes"] = allowed
        record = GrantCode(
            code=code,
            scopes=allowed,
            expires_at=time.time() + CODE_TTL_S,
            client_id=pending["client_id"],
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=self.edge.resource_url,
            subject=caller.principal.subject,
            principal=principal,
        )
        await self.store.put_code(code, record.model_dump(mode="json"))
        # RFC 9207: `iss` tells the client which server answered (advertised in our metadata)
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state, iss=self.edge.public_url)

    # --- codes and tokens ---
    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> GrantCode | None:
        record = await self.store.get_code(authorization_code)
        return GrantCode.model_validate(record) if record else None

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: GrantCode
    ) -> OAuthToken:
        if await self.store.take_code(authorization_code.code) is None:
            raise TokenError("invalid_grant", "authorization code already used")
        return await self._issue(client.client_id, authorization_code.principal, uuid.uuid4().hex)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> GrantRefresh | None:
        record = await self.store.get_refresh(refresh_token)
        return GrantRefresh.model_validate(record) if record else None

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: GrantRefresh, scopes: list[str]
    ) -> OAuthToken:
        if await self.store.take_refresh(refresh_token.token) is None:
            raise TokenError("invalid_grant", "refresh token already used; sign in again")
        principal = dict(refresh_token.principal)
        still = await self.auth.credential_principal(Principal(**_tuples(principal)))
        if still is None:
            await self.store.revoke_family(refresh_token.family)
            raise TokenError("invalid_grant", "the access key behind this grant was revoked; sign in again")
        principal["scopes"] = [s for s in scopes if s in principal["scopes"]]
        return await self._issue(client.client_id, principal, refresh_token.family)

    async def _issue(self, client_id: str, principal: dict[str, Any], family: str) -> OAuthToken:
        now = int(time.time())
        claims = {
            "iss": self.edge.public_url,
            "aud": self.edge.resource_url,
            "sub": principal["subject"],
            "client_id": client_id,
            "scope": " ".join(principal["scopes"]),
            "iat": now,
            "exp": now + self.access_ttl,
            "jti": uuid.uuid4().hex,
            "fam": family,
            "mem": {k: principal[k] for k in ("tenant_id", "workspaces", "agents", "profiles")},
        }
        refresh = secrets.token_urlsafe(32)
        record = GrantRefresh(
            token=refresh,
            client_id=client_id,
            scopes=principal["scopes"],
            expires_at=now + self.store.refresh_ttl,
            resource=self.edge.resource_url,
            subject=principal["subject"],
            principal=principal,
            family=family,
        )
        await self.store.put_refresh(refresh, record.model_dump(mode="json"))
        return OAuthToken(
            access_token=self.signer.sign(claims),
            token_type="Bearer",
            expires_in=self.access_ttl,
            scope=claims["scope"],
            refresh_token=refresh,
        )

    # --- access tokens ---
    async def verify(self, token: str) -> Caller:
        """The caller an access token stands for (the Authenticator's TokenVerifier)."""
        try:
            claims = self.signer.verify(token, audience=self.edge.resource_url, issuer=self.edge.public_url)
        except ExpiredSignatureError:
            raise AuthError("the access token expired") from None
        except JWTClaimsError:
            raise AuthError("the access token was issued for another resource or issuer") from None
        except JWTError:
            raise AuthError("invalid access token") from None
        if await self.store.access_revoked(claims["jti"], claims["fam"]):
            raise AuthError("the access token was revoked")
        principal = Principal(**_tuples({**claims["mem"], "scopes": claims["scope"].split(), "subject": claims["sub"]}))
        if await self.auth.credential_principal(principal) is None:
            raise AuthError("the access key behind this token was revoked")
        return Caller(principal, "oauth", expires_at=float(claims["exp"]))

    async def load_access_token(self, token: str) -> AccessToken | None:
        try:
            claims = self.signer.verify(token, audience=self.edge.resource_url, issuer=self.edge.public_url)
        except JWTError:
            return None
        scopes = claims["scope"].split()
        access = AccessToken(token=token, client_id=claims["client_id"], scopes=scopes, expires_at=claims["exp"])
        return access.model_copy(update={"resource": claims["aud"], "subject": claims["sub"], "claims": claims})

    async def revoke_token(self, token: AccessToken | GrantRefresh) -> None:
        if isinstance(token, GrantRefresh):
            await self.store.drop_refresh(token.token)
        elif token.claims:
            await self.store.revoke_access(token.claims["jti"], int(token.claims["exp"] - time.time()))
            await self.store.revoke_family(token.claims["fam"])


def _tuples(fields: dict[str, Any]) -> dict[str, Any]:
    wanted = ("tenant_id", "workspaces", "agents", "scopes", "profiles", "subject")
    return {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items() if k in wanted}
