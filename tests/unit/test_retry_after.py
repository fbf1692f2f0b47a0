"""Retry-After as the providers send it: a number of seconds or an HTTP date (RFC 9110 §10.2.3)."""

from __future__ import annotations

import email.utils
import time

import pytest

from memento_shared.worker import parse_retry_after


def test_seconds_and_http_dates_become_seconds_to_wait():
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after("1.5") == 1.5
    assert parse_retry_after(email.utils.formatdate(time.time() + 30, usegmt=True)) == pytest.approx(30, abs=1.5)
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 -0000") == 0.0  # naive "-0000" read as GMT, and past
    assert parse_retry_after(email.utils.formatdate(time.time() - 60, usegmt=True)) == 0.0
    assert parse_retry_after("-3") == 0.0


@pytest.mark.parametrize("value", [None, "", "soon", "Wed, 99 Foo 2015"])
def test_anything_else_is_no_advice(value):
    assert parse_retry_after(value) is None
