"""Without MEMENTO_ACCESS_KEY the gateway listens on loopback only, unless told otherwise explicitly, and says so."""

from __future__ import annotations

import logging

import pytest

from memento_gateway.__main__ import bind_host
from memento_gateway.settings import GatewaySettings as Settings


@pytest.mark.parametrize(
    ("env", "host", "event"),
    [
        ({"MEMENTO_BIND_HOST": "0.0.0.0"}, "127.0.0.1", "gateway.auth_disabled_loopback_only"),
        ({"MEMENTO_BIND_HOST": "0.0.0.0", "MEMENTO_ALLOW_UNAUTHENTICATED_BIND": "true"}, "0.0.0.0", "exposed"),
        ({"MEMENTO_BIND_HOST": "127.0.0.1"}, "127.0.0.1", "gateway.auth_disabled"),
        ({"MEMENTO_BIND_HOST": "0.0.0.0", "MEMENTO_ACCESS_KEY": "k"}, "0.0.0.0", None),
    ],
)
def test_where_the_gateway_listens(caplog, env, host, event):
    with caplog.at_level(logging.WARNING, logger="memento_gateway"):
        assert bind_host(Settings(**env)) == host
    events = [r.getMessage() for r in caplog.records]
    assert (event is None and not events) or any(event in e for e in events)
