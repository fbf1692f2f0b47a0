"""The gateway's settings: its port, the edge (public address, request limits, streams, OAuth) and where memory-api
is."""

from __future__ import annotations

from pydantic import Field

from memento_shared.settings import InternalSettings, RedisSettings, ServiceSettings, SessionSettings


class GatewaySettings(ServiceSettings, RedisSettings, InternalSettings, SessionSettings):
    """The gateway's own variables over the sections it shares: telemetry, Redis, the internal secret, sessions."""

    port: int = Field(56332, alias="PORT")
    memento_access_key: str = Field("", alias="MEMENTO_ACCESS_KEY")
    allowed_origins: str = Field("", alias="ALLOWED_ORIGINS")
    memory_api_url: str = Field("http://127.0.0.1:56333", alias="MEMORY_API_URL")
    data_dir: str = Field("./.memento", alias="MEMENTO_DATA_DIR")
    upstream_timeout_s: float = Field(30.0, alias="UPSTREAM_TIMEOUT_SECONDS")
    # the address clients use; OAuth's issuer and the protected resource are derived from it (empty: bind address)
    public_url: str = Field("", alias="MEMENTO_PUBLIC_URL")
    allowed_hosts: str = Field("", alias="MEMENTO_ALLOWED_HOSTS")  # Host values accepted besides loopback names
    max_body_bytes: int = Field(1_000_000, alias="MEMENTO_MAX_BODY_BYTES")
    # per principal, shared by all replicas; generous (the throughput benchmark must fit under it); 0: none
    rate_limit_per_minute: int = Field(60_000, alias="MEMENTO_RATE_LIMIT_PER_MINUTE")
    max_streams_per_principal: int = Field(16, alias="MEMENTO_MAX_STREAMS_PER_PRINCIPAL")
    sse_keepalive_s: float = Field(15.0, alias="MEMENTO_SSE_KEEPALIVE_SECONDS")
    oauth_signing_key: str = Field("", alias="MEMENTO_OAUTH_SIGNING_KEY")  # PEM; else kept in the data dir
    oauth_access_token_s: int = Field(900, alias="MEMENTO_OAUTH_ACCESS_TOKEN_SECONDS")
    oauth_refresh_token_days: int = Field(30, alias="MEMENTO_OAUTH_REFRESH_TOKEN_DAYS")
    # OAuth clients identified by a Client ID Metadata Document URL (memento_gateway.oauth.cimd)
    oauth_cimd_enabled: bool = Field(True, alias="MEMENTO_OAUTH_CIMD")
    oauth_cimd_allow_private: bool = Field(False, alias="MEMENTO_OAUTH_CIMD_ALLOW_PRIVATE_ADDRESSES")
    oauth_cimd_ca_file: str = Field("", alias="MEMENTO_OAUTH_CIMD_CA_FILE")  # a CA trusted besides the system's
    oauth_cimd_timeout_s: float = Field(5.0, alias="MEMENTO_OAUTH_CIMD_TIMEOUT_SECONDS", gt=0, le=30)
    # with MEMENTO_ACCESS_KEY empty the gateway binds loopback only, unless this says otherwise explicitly
    allow_unauthenticated_bind: bool = Field(False, alias="MEMENTO_ALLOW_UNAUTHENTICATED_BIND")
