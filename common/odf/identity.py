"""Dataset identities: ``did:odf`` DatasetIDs.

A DatasetID is the multicodec ``ed25519-pub`` (0xED) prefix followed by a 32-byte ed25519
public key. Its text form is ``did:odf:`` + multibase: we always write base16
(``did:odf:fed01...``) and read every multibase encoding (``did:odf:z6Mk...`` is the same ID in
base58btc, as in ``did:key``). Key pairs are made in ``common.odf.keys``; names, aliases and
references to datasets are in ``common.odf.dataset_refs``.
"""

from __future__ import annotations

from common.odf.errors import DecodeError
from common.odf.multihash import (
    decode_uvarint,
    encode_uvarint,
    multibase_decode,
    multibase_encode_base16,
)
from common.odf.record import positional_record

ED25519_PUB = 0xED
DID_ODF_PREFIX = "did:odf:"
DID_KEY_PREFIX = "did:key:"
_MASK64 = (1 << 64) - 1


@positional_record
class DatasetID:
    """A dataset's globally unique identity, derived from an ed25519 public key."""

    public_key: bytes

    def __post_init__(self) -> None:
        if len(self.public_key) != 32:
            raise DecodeError(f"a DatasetID key must be 32 bytes, got {len(self.public_key)}")

    @classmethod
    def from_public_key(cls, public_key: bytes) -> DatasetID:
        """The ID of the ed25519 public key ``public_key`` (its 32 raw bytes)."""
        return cls(bytes(public_key))

    @classmethod
    def parse(cls, text: str) -> DatasetID:
        """Parse ``did:odf:<multibase>`` in any multibase encoding (same as ``from_did``)."""
        return cls.from_did(text)

    @classmethod
    def from_bytes(cls, data: bytes) -> DatasetID:
        code, pos = decode_uvarint(data)
        if code != ED25519_PUB:
            raise DecodeError(f"DatasetID has multicodec 0x{code:x}, expected ed25519-pub (0xed)")
        key = data[pos:]
        if len(key) != 32:
            raise DecodeError(f"DatasetID key is {len(key)} bytes, expected 32")
        return cls(bytes(key))

    @classmethod
    def from_did(cls, text: str) -> DatasetID:
        if not text.startswith(DID_ODF_PREFIX):
            raise DecodeError(f"{text!r} is not a did:odf identifier")
        try:
            return cls.from_bytes(multibase_decode(text[len(DID_ODF_PREFIX) :]))
        except DecodeError as e:
            raise DecodeError(f"{text!r} is not a valid did:odf identifier: {e.reason}") from None

    @classmethod
    def new_seeded(cls, seed: bytes) -> DatasetID:
        """The reference's ``DatasetID::new_seeded_ed25519``: a deterministic test identity.

        Not a real key: four Xoshiro256++ outputs seeded with the zero-padded ``seed``.
        """
        if len(seed) > 32:
            raise ValueError("seed must be at most 32 bytes")
        padded = seed.ljust(32, b"\0")
        state = [int.from_bytes(padded[i : i + 8], "little") for i in range(0, 32, 8)]
        if not any(state):
            state = _splitmix64_state(0)
        key = b"".join(_xoshiro256pp_next(state).to_bytes(8, "little") for _ in range(4))
        return cls(key)

    def to_bytes(self) -> bytes:
        return encode_uvarint(ED25519_PUB) + self.public_key

    def to_multibase(self) -> str:
        """``f`` + lowercase hex of the multicodec bytes (``fed01...``)."""
        return multibase_encode_base16(self.to_bytes())

    def to_did(self) -> str:
        """``did:odf:fed01...``: always base16, as ODF writes it."""
        return DID_ODF_PREFIX + self.to_multibase()

    def to_did_key(self) -> str:
        """The equivalent ``did:key`` (the same bytes in base58btc)."""
        from multiformats import multibase  # imported lazily: slow to import

        return DID_KEY_PREFIX + str(multibase.encode(self.to_bytes(), "base58btc"))

    def __str__(self) -> str:
        return self.to_did()

    def __repr__(self) -> str:
        return f"DatasetID({self.to_did()!r})"


def _rotl(x: int, k: int) -> int:
    return ((x << k) | (x >> (64 - k))) & _MASK64


def _xoshiro256pp_next(s: list[int]) -> int:
    result = (_rotl((s[0] + s[3]) & _MASK64, 23) + s[0]) & _MASK64
    t = (s[1] << 17) & _MASK64
    s[2] ^= s[0]
    s[3] ^= s[1]
    s[1] ^= s[2]
    s[0] ^= s[3]
    s[2] ^= t
    s[3] = _rotl(s[3], 45)
    return result


def _splitmix64_state(seed: int) -> list[int]:
    out = []
    state = seed
    for _ in range(4):
        state = (state + 0x9E3779B97F4A7C15) & _MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        out.append(z ^ (z >> 31))
    return out
