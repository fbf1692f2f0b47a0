"""The key that signs access tokens (ES256 JWTs via python-jose) and the JWKS that publishes its public half.

Every replica must sign and verify with the same key: MEMENTO_OAUTH_SIGNING_KEY (a PEM, from a secret) wins;
otherwise the key is generated once into `<MEMENTO_DATA_DIR>/oauth/signing-key.pem` (0600) and reused. A data
dir we cannot write gives a key for this process only (tokens then die with it), and says so.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from jose import jwk, jwt

from memento_gateway.settings import GatewaySettings

log = logging.getLogger(__name__)
ALGORITHM = "ES256"


class Signer:
    def __init__(self, private_pem: str) -> None:
        self.private_pem = private_pem
        public = jwk.construct(private_pem, ALGORITHM).public_key().to_dict()
        thumbprint = json.dumps({k: public[k] for k in ("crv", "kty", "x", "y")}, separators=(",", ":"))
        # RFC 7638 thumbprint as the key id: it changes exactly when the key does
        self.kid = base64.urlsafe_b64encode(hashlib.sha256(thumbprint.encode()).digest()).decode().rstrip("=")
        self.public = {**public, "kid": self.kid, "use": "sig", "alg": ALGORITHM}

    def sign(self, claims: dict[str, Any]) -> str:
        return jwt.encode(claims, self.private_pem, algorithm=ALGORITHM, headers={"kid": self.kid})

    def verify(self, token: str, *, audience: str, issuer: str) -> dict[str, Any]:
        """The claims; jose's JWTError (ExpiredSignatureError, JWTClaimsError) when the token is not good here."""
        return jwt.decode(token, self.public, algorithms=[ALGORITHM], audience=audience, issuer=issuer)

    def jwks(self) -> dict[str, Any]:
        return {"keys": [self.public]}


def _generate() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return pem.decode()


def _kept_in(path: Path) -> str:
    """The key in `path`, created there first if missing. Written aside and hard-linked into place: two replicas
    starting at once agree on one key, and neither ever reads a half-written file."""
    if not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        aside = path.with_name(f".{path.name}.{os.getpid()}")
        fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(_generate())
        try:
            os.link(aside, path)
        except FileExistsError:
            pass
        finally:
            aside.unlink()
    return path.read_text()


def load_signer(settings: GatewaySettings) -> Signer:
    if settings.oauth_signing_key.strip():
        return Signer(settings.oauth_signing_key.strip())
    path = Path(settings.data_dir).expanduser() / "oauth" / "signing-key.pem"
    try:
        return Signer(_kept_in(path))
    except OSError as exc:
        log.warning("oauth.ephemeral_signing_key", extra={"reason": exc.strerror or type(exc).__name__})
        return Signer(_generate())
