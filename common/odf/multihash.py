"""Multihash values and the multibase text form used everywhere in ODF.

ODF writes multibase base16 (``f`` + lowercase hex, RFC-012) and reads every multibase
encoding in final state of the multibase spec.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import ClassVar

from common.odf.errors import DecodeError

SHA3_256 = 0x16
ARROW0_SHA3_256 = 0x300016


def encode_uvarint(value: int) -> bytes:
    """Unsigned LEB128, as used by multiformats."""
    if value < 0:
        raise ValueError("uvarint must be non-negative")
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def decode_uvarint(data: bytes, pos: int = 0) -> tuple[int, int]:
    """Decode an unsigned LEB128 at ``pos``; returns (value, next position)."""
    value = 0
    shift = 0
    while True:
        if pos >= len(data):
            raise DecodeError("truncated unsigned varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise DecodeError("unsigned varint is too long")


def multibase_encode_base16(data: bytes) -> str:
    return "f" + data.hex()


def multibase_decode(text: str) -> bytes:
    """Decode multibase text in any encoding of final status (base16 fast path)."""
    if not text:
        raise DecodeError("empty multibase string")
    if text[0] in "fF":
        try:
            return bytes.fromhex(text[1:])
        except ValueError:
            raise DecodeError(f"invalid base16 multibase string {text!r}") from None
    from multiformats import multibase  # imported lazily: slow to import

    try:
        return bytes(multibase.decode(text))
    except Exception as e:  # the library raises several unrelated types
        raise DecodeError(f"invalid multibase string {text!r}: {e}") from None


@dataclass(frozen=True, slots=True)
class Multihash:
    """A self-describing hash: multicodec code of the hash function and the digest."""

    code: int
    digest: bytes

    NAMES: ClassVar[dict[int, str]] = {SHA3_256: "sha3-256", ARROW0_SHA3_256: "arrow0-sha3-256"}

    @classmethod
    def sha3_256(cls, data: bytes) -> Multihash:
        return cls(SHA3_256, hashlib.sha3_256(data).digest())

    @classmethod
    def from_bytes(cls, data: bytes) -> Multihash:
        code, pos = decode_uvarint(data)
        size, pos = decode_uvarint(data, pos)
        digest = data[pos:]
        if len(digest) != size:
            raise DecodeError(
                f"multihash digest length is {len(digest)} bytes, its header says {size}"
            )
        return cls(code, bytes(digest))

    @classmethod
    def from_multibase(cls, text: str) -> Multihash:
        return cls.from_bytes(multibase_decode(text))

    def to_bytes(self) -> bytes:
        return encode_uvarint(self.code) + encode_uvarint(len(self.digest)) + self.digest

    def to_multibase(self) -> str:
        return multibase_encode_base16(self.to_bytes())

    def __str__(self) -> str:
        return self.to_multibase()

    def __repr__(self) -> str:
        return f"Multihash({self.to_multibase()!r})"
