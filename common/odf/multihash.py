"""Multihash values and the multibase text form used everywhere in ODF.

ODF writes multibase base16 (``f`` + lowercase hex, RFC-012) and reads every multibase
encoding in final state of the multibase spec.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from typing import ClassVar

from common.odf.errors import DecodeError
from common.odf.record import positional_record

try:  # the interpreter's own SHA-3 for block manifests (a few hundred bytes): importing
    # hashlib loads OpenSSL, 2 ms of the start of every command that reads a block
    from _sha3 import sha3_256 as _sha3_256  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - an interpreter built without it
    from hashlib import sha3_256 as _sha3_256

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


_HEX = re.compile(r"[0-9a-fA-F]*")
_BASE32 = re.compile(r"[A-Za-z2-7]*")
_BASE64 = re.compile(r"[A-Za-z0-9+/]*")
_BASE64URL = re.compile(r"[A-Za-z0-9_-]*")
_BASE58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_BASE58_DIGITS = {c: i for i, c in enumerate(_BASE58_ALPHABET)}


def _decode_base16(body: str) -> bytes:
    if not _HEX.fullmatch(body) or len(body) % 2:
        raise ValueError("not an even number of hexadecimal digits")
    return bytes.fromhex(body)


def _decode_base32(body: str) -> bytes:
    """RFC 4648 base32 without padding; case-insensitive."""
    if not _BASE32.fullmatch(body):
        raise ValueError("not base32 characters")
    return base64.b32decode(body.upper() + "=" * (-len(body) % 8))


def _decode_base58btc(body: str) -> bytes:
    value = 0
    for char in body:
        digit = _BASE58_DIGITS.get(char)
        if digit is None:
            raise ValueError(f"{char!r} is not a base58btc character")
        value = value * 58 + digit
    leading_zeros = len(body) - len(body.lstrip("1"))
    return b"\x00" * leading_zeros + value.to_bytes((value.bit_length() + 7) // 8, "big")


def _decode_base64(body: str, *, url: bool, padded: bool) -> bytes:
    """RFC 4648 base64 (``url``: the URL-safe alphabet), padding required or forbidden."""
    unpadded = body.rstrip("=") if padded else body
    if not (_BASE64URL if url else _BASE64).fullmatch(unpadded):
        raise ValueError("not base64 characters" + (" (with padding)" if padded else ""))
    if padded and (len(body) % 4 or len(body) - len(unpadded) > 2):
        raise ValueError("wrong base64 padding")
    standard = unpadded.translate(str.maketrans("-_", "+/")) if url else unpadded
    return base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)


# Multibase encodings in final status (multibase.csv), decoded natively: prefix -> (name, decoder).
_FINAL_DECODERS: dict[str, tuple[str, Callable[[str], bytes]]] = {
    "f": ("base16", _decode_base16),
    "F": ("base16upper", _decode_base16),
    "b": ("base32", _decode_base32),
    "B": ("base32upper", _decode_base32),
    "z": ("base58btc", _decode_base58btc),
    "m": ("base64", lambda body: _decode_base64(body, url=False, padded=False)),
    "u": ("base64url", lambda body: _decode_base64(body, url=True, padded=False)),
    "U": ("base64urlpad", lambda body: _decode_base64(body, url=True, padded=True)),
}


def multibase_decode(text: str) -> bytes:
    """Decode multibase text: every encoding in final status of the multibase spec
    (base16, base16upper, base32, base32upper, base58btc, base64, base64url, base64urlpad);
    draft and experimental encodings through the ``multiformats`` library."""
    if not text:
        raise DecodeError("empty multibase string")
    final = _FINAL_DECODERS.get(text[0])
    if final is not None:
        name, decoder = final
        try:
            return decoder(text[1:])
        except (ValueError, binascii.Error) as e:
            raise DecodeError(f"invalid {name} multibase string {text!r}: {e}") from None
    from multiformats import multibase  # imported lazily: only for rare encodings

    try:
        return bytes(multibase.decode(text))
    except Exception as e:  # the library raises several unrelated types
        raise DecodeError(f"invalid multibase string {text!r}: {e}") from None


@positional_record
class Multihash:
    """A self-describing hash: multicodec code of the hash function and the digest."""

    code: int
    digest: bytes

    NAMES: ClassVar[dict[int, str]] = {SHA3_256: "sha3-256", ARROW0_SHA3_256: "arrow0-sha3-256"}

    @classmethod
    def sha3_256(cls, data: bytes) -> Multihash:
        return cls(SHA3_256, _sha3_256(data).digest())

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
