"""The state Redis's key layout (memento_shared.keys) and the two Redis roles' settings."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from redis.crc import key_slot

from memento_shared import keys
from memento_shared.settings import RedisSettings as Settings


def slot(key: str) -> int:
    return key_slot(key.encode())


@pytest.mark.parametrize("tenant", ["acme", "t-1:2", "}x", "{a}", "", "%7D", "a}b{c"])
def test_every_key_of_a_tenant_shares_one_slot_whatever_its_id_holds(tenant):
    tenant_keys = [
        keys.l1_set(tenant, "default", "agent:{x}", "kw"),
        keys.working_memory(tenant, "s1"),
        keys.seen(tenant, "s1"),
        keys.page_snapshot(tenant, "tok"),
        keys.open_snapshots(tenant, "default", "a"),
        keys.consolidation_progress(tenant, "default"),
        keys.progress(tenant, "0" * 32),
        keys.session(tenant, "s1"),
        keys.stream_owner(tenant, "s1"),
        keys.sse_events(tenant, "s1", "abc"),
        keys.rate(keys.identity(tenant, "operator")),
        keys.streams(keys.identity(tenant, "operator")),
    ]
    assert {slot(k) for k in tenant_keys} == {slot(keys.tag(tenant))}
    assert all(keys.known(k) for k in tenant_keys), [k for k in tenant_keys if not keys.known(k)]


def test_tenants_whose_ids_differ_only_in_braces_get_tags_of_their_own():
    assert len({keys.tag(t) for t in ["a", "{a}", "a}", "%7Da", "}a", "", "%00"]}) == 7


def test_keys_of_no_tenant_are_named_and_spread():
    control = [keys.L1_READY, keys.L1_GENERATION, keys.L1_REBUILDING, keys.L1_WANTED]
    assert len({slot(k) for k in control}) == 1, "MARK_READY and invalidate touch these together"
    assert len({slot(k) for k in keys.session_indexes()}) > keys.SESSION_INDEX_BUCKETS // 2
    assert keys.session_index("abc") in keys.session_indexes()
    untagged = [keys.OAUTH_PREFIX + "refresh:ab12", keys.CONSOLE_SESSION_PREFIX + "xyz", keys.rate("ip:127.0.0.1")]
    assert all(keys.known(k) for k in control + keys.session_indexes() + untagged)
    assert not keys.known("memento:l1:ready:2") and not keys.known("arq:job:x") and not keys.known("memento:queue:e")
    # the SCAN pattern for the keyword sets finds them and none of the control keys
    assert keys.l1_set("t", "w", "a", "k").startswith(keys.L1_SETS[:-1])
    assert not any(k.startswith(keys.L1_SETS[:-1]) for k in control)


def test_the_queue_role_defaults_to_the_state_redis_and_is_never_a_cluster():
    assert Settings(REDIS_URL="redis://h:1/0").redis_queue_url == "redis://h:1/0"
    split = Settings(REDIS_URL="redis+cluster://h:1,h:2", REDIS_QUEUE_URL="redis://q:1/0")
    assert split.redis_queue_url == "redis://q:1/0"
    with pytest.raises(ValidationError, match="REDIS_QUEUE_URL"):
        Settings(REDIS_URL="redis+cluster://h:1,h:2")
    with pytest.raises(ValidationError, match="REDIS_QUEUE_URL"):
        Settings(REDIS_URL="redis://h:1/0", REDIS_QUEUE_URL="redis+cluster://h:1")
