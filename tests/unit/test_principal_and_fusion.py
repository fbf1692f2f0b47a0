from __future__ import annotations

import pytest

from memento_memory_api.recall.fusion import rrf
from memento_shared.principal import Principal, PrincipalError, decode_principal, encode_principal


def test_principal_round_trip_and_tamper_detection():
    principal = Principal(tenant_id="acme", agents=("bot",), scopes=("read",), workspace="w1")
    header = encode_principal(principal, "secret")
    assert decode_principal(header, "secret") == principal
    with pytest.raises(PrincipalError):
        decode_principal(header, "other-secret")
    body, signature = header.rsplit(".", 1)
    forged = encode_principal(Principal(tenant_id="evil"), "attacker").rsplit(".", 1)[0]
    with pytest.raises(PrincipalError):
        decode_principal(f"{forged}.{signature}", "secret")
    with pytest.raises(PrincipalError):
        decode_principal(header, "secret", now=principal.issued_at + 3600)


def test_rrf_rewards_agreement():
    fused = rrf([["a", "b", "c"], ["c", "a", "d"]], k=10)
    assert [i for i, _ in fused][:2] == ["a", "c"]
    assert dict(fused)["a"] == pytest.approx(1 / 11 + 1 / 12)
