"""The MCP SDK's own OAuth client (`mcp.client.auth.OAuthClientProvider`), with a "browser" that follows the
authorization redirect to the login page and submits an access key there, as a person would."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

REDIRECT_URI = "http://127.0.0.1:33418/callback"  # never contacted: the browser stops at the redirect


@dataclass
class MemoryStorage:
    tokens: OAuthToken | None = None
    client: OAuthClientInformationFull | None = None
    history: list[OAuthToken] = field(default_factory=list)

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens
        self.history.append(tokens)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


@dataclass
class Browser:
    """Follows /authorize to the login page, types the key, and keeps what the redirect back carried."""

    access_key: str
    pages: list[str] = field(default_factory=list)
    result: AuthorizationCodeResult | None = None

    async def open(self, authorization_url: str) -> None:
        async with httpx.AsyncClient(trust_env=False, timeout=10) as http:
            to_login = await http.get(authorization_url)
            assert to_login.status_code == 302, to_login.text
            login_url = urljoin(authorization_url, to_login.headers["location"])
            page = await http.get(login_url)
            assert page.status_code == 200 and "Access key" in page.text
            self.pages.append(page.text)
            request_id = parse_qs(urlsplit(login_url).query)["request"][0]
            form = {"request": request_id, "access_key": self.access_key, "decision": "allow"}
            back = await http.post(urljoin(login_url, "/oauth/login"), data=form)
            assert back.status_code == 302, back.text
            query = parse_qs(urlsplit(back.headers["location"]).query)
            assert back.headers["location"].startswith(REDIRECT_URI), back.headers["location"]
            self.result = AuthorizationCodeResult(
                code=query["code"][0], state=query["state"][0], iss=query.get("iss", [None])[0]
            )

    async def callback(self) -> AuthorizationCodeResult:
        assert self.result is not None
        return self.result


def oauth(server_url: str, browser: Browser, storage: MemoryStorage) -> OAuthClientProvider:
    metadata = OAuthClientMetadata(
        client_name="memento-tests",
        redirect_uris=[REDIRECT_URI],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
    )
    return OAuthClientProvider(server_url, metadata, storage, browser.open, browser.callback)
