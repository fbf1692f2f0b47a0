"""The rules a Client ID Metadata Document's fetch follows that need no server: which addresses may be fetched
from, and how long a document is kept by its response headers (tests/gateway/test_cimd.py covers the rest)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from memento_gateway.oauth.cimd import DEFAULT_CACHE_S, MAX_CACHE_S, _address_allowed, cache_seconds


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.215.14", True),
        ("2606:2800:21f:cb07:6820:80da:af6b:8b2c", True),
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),  # cloud metadata services
        ("100.64.0.1", False),  # carrier-grade NAT
        ("0.0.0.0", False),
        ("::1", False),
        ("fe80::1%eth0", False),
        ("fd00::1", False),
        ("::ffff:127.0.0.1", False),  # loopback written as IPv6
        ("224.0.0.1", False),
        ("64:ff9b::a00:1", False),  # NAT64 of 10.0.0.1
        ("64:ff9b::5db8:d70e", True),  # NAT64 of a public address
        ("2002:7f00:1::1", False),  # 6to4 of 127.0.0.1
        ("2001:0:4136:e378:8000:63bf:f5ff:fffe", False),  # Teredo, its client 10.0.0.1
    ],
)
def test_only_public_addresses_unless_the_operator_allows_private_ones(address, public):
    assert _address_allowed(address, allow_private=False) is public
    assert _address_allowed(address, allow_private=True)


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"Cache-Control": "public, max-age=600"}, 600),
        ({"Cache-Control": 'max-age="60"'}, 60),
        ({"Cache-Control": "max-age=99999999"}, MAX_CACHE_S),
        ({"Cache-Control": "no-store"}, 0),
        ({"Cache-Control": "max-age=600, no-cache"}, 0),
        ({"Cache-Control": "private, max-age=600"}, 0),
        ({"Expires": "in 120 s"}, 120),  # made when the test runs, not when it is collected
        ({"Expires": "0"}, 0),
        ({}, DEFAULT_CACHE_S),
    ],
)
def test_documents_are_kept_as_long_as_their_headers_say(headers, seconds):
    if headers.get("Expires") == "in 120 s":
        headers = {"Expires": format_datetime(datetime.now(UTC) + timedelta(seconds=120), usegmt=True)}
    assert abs(cache_seconds(headers) - seconds) <= 2  # Expires has whole seconds
