"""Where the gateway is reached from: its public URL (OAuth issuer, protected resource) and the Host and Origin
values it accepts. Derived once from the settings so every route agrees on them."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from memento_gateway.settings import GatewaySettings

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]", "::1")


@dataclass(frozen=True)
class Edge:
    public_url: str  # scheme://host[:port], no trailing slash: the OAuth issuer (RFC 8414 compares it as a string)
    loopback: bool  # bound to loopback only: DNS-rebinding protection applies even without a configured list
    allowed_hosts: tuple[str, ...]
    allowed_origins: tuple[str, ...]

    @property
    def resource_url(self) -> str:
        return self.public_url + "/mcp"

    @property
    def resource_metadata_url(self) -> str:
        # RFC 9728 §3.1: the well-known segment goes between the host and the resource's path
        return self.public_url + "/.well-known/oauth-protected-resource/mcp"


def _connect_host(bind_host: str) -> str:
    if bind_host in ("0.0.0.0", "::", "*", ""):
        return "127.0.0.1"
    return f"[{bind_host}]" if ":" in bind_host and not bind_host.startswith("[") else bind_host


def _split(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def edge_from(settings: GatewaySettings) -> Edge:
    public = settings.public_url.strip().rstrip("/") or f"http://{_connect_host(settings.bind_host)}:{settings.port}"
    return Edge(
        public_url=public,
        loopback=settings.bind_host in ("127.0.0.1", "localhost", "::1"),
        allowed_hosts=tuple(h.lower() for h in _split(settings.allowed_hosts)),
        allowed_origins=_split(settings.allowed_origins),
    )


def host_name(host: str) -> str:
    """`127.0.0.1:8000` → `127.0.0.1`, `[::1]:8000` → `[::1]`."""
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def host_allowed(edge: Edge, host: str | None) -> bool:
    """Loopback names always; on a public bind any Host unless MEMENTO_ALLOWED_HOSTS lists them."""
    if not host:
        return False
    host = host.lower()
    name = host_name(host)
    if name in LOOPBACK_HOSTS or host == urlsplit(edge.public_url).netloc.lower():
        return True
    if host in edge.allowed_hosts or any(h.endswith(":*") and name == h[:-2] for h in edge.allowed_hosts):
        return True
    return not edge.loopback and not edge.allowed_hosts


def origin_allowed(edge: Edge, origin: str | None) -> bool:
    """ALLOWED_ORIGINS when set; otherwise loopback and our own origin on a loopback bind, anything on a public one
    (seed 000 §10.2: all origins permitted when empty - a browser page elsewhere still needs a credential)."""
    if origin is None:
        return True  # not a browser, or a same-origin request
    if edge.allowed_origins:
        return origin in edge.allowed_origins
    if origin.rstrip("/") == edge.public_url:
        return True
    if not edge.loopback:
        return True
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and host_name(parts.netloc.lower()) in LOOPBACK_HOSTS
