"""Everything a request handler needs, built once per process in the lifespan (app.py) and reached through
`request.app.state.gateway`."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis
from starlette.requests import Request

from memento_gateway.auth.authenticator import Authenticator
from memento_gateway.edge import Edge
from memento_gateway.http.limits import RateLimiter, StreamSlots
from memento_gateway.mcp.hub import StreamHub
from memento_gateway.mcp.inflight import InFlight
from memento_gateway.mcp.sessions import SessionStore
from memento_gateway.mcp.subscriptions import Subscriptions
from memento_gateway.oauth.provider import MementoOAuthProvider
from memento_gateway.settings import GatewaySettings
from memento_gateway.upstream import Upstream


@dataclass
class Gateway:
    settings: GatewaySettings
    edge: Edge
    redis: Redis
    sessions: SessionStore
    hub: StreamHub
    inflight: InFlight
    upstream: Upstream
    auth: Authenticator
    rate: RateLimiter
    streams: StreamSlots
    oauth: MementoOAuthProvider
    subscriptions: Subscriptions


def gateway(request: Request) -> Gateway:
    return request.app.state.gateway
