"""Ed25519 key pairs behind dataset identities (spec: "Dataset Identity").

A new dataset gets a fresh key pair; its DatasetID is the public key (``did:odf:fed01...``)
and the private key, kept by its owner, proves ownership. Keys travel as PKCS#8 PEM.
"""

from __future__ import annotations

from Crypto.PublicKey import ECC

from common.odf.errors import ValidationError
from common.odf.identity import DatasetID

CURVE = "Ed25519"


def generate_dataset_key() -> tuple[bytes, DatasetID]:
    """A new random key pair: (private key as PKCS#8 PEM bytes, the DatasetID of its public key)."""
    key = ECC.generate(curve=CURVE)
    return _pem(key), _id_of(key)


def dataset_key_from_seed(seed: bytes) -> tuple[bytes, DatasetID]:
    """The key pair of a 32-byte RFC 8032 private key (seed): deterministic, for tests/tools."""
    if len(seed) != 32:
        raise ValidationError(f"an ed25519 private key seed must be 32 bytes, got {len(seed)}")
    key = ECC.construct(curve=CURVE, seed=bytes(seed))
    return _pem(key), _id_of(key)


def dataset_id_of_private_key(pem: bytes | str) -> DatasetID:
    """The DatasetID that a PEM-encoded ed25519 private key controls."""
    try:
        key = ECC.import_key(pem)
    except (ValueError, IndexError, TypeError) as e:
        raise ValidationError(f"not a PEM-encoded ed25519 private key: {e}") from None
    if key.curve != CURVE:
        raise ValidationError(f"expected an ed25519 private key, got a {key.curve} key")
    if not key.has_private():
        raise ValidationError("expected an ed25519 private key, got only a public key")
    return _id_of(key)


def _pem(key: ECC.EccKey) -> bytes:
    return str(key.export_key(format="PEM")).encode()


def _id_of(key: ECC.EccKey) -> DatasetID:
    return DatasetID.from_public_key(bytes(key.public_key().export_key(format="raw")))
