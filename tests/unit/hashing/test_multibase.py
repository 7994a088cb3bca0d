"""Multibase text of hashes: every encoding in final status of the multibase spec is read.

Vectors are from the multibase spec's tests (``tests/basic.csv``, ``leading_zero.csv``,
``case_insensitivity.csv``) and kamu-cli's ``test_multihash.rs``.
"""

from __future__ import annotations

import base64
from collections.abc import Callable

import pytest

from common.odf.errors import DecodeError
from common.odf.multihash import Multihash, multibase_decode

# Encodings in final status (multibase.csv), with "yes mani !" and "\x00yes mani !".
FINAL = {
    "base16": ("f796573206d616e692021", "f00796573206d616e692021"),
    "base16upper": ("F796573206D616E692021", "F00796573206D616E692021"),
    "base32": ("bpfsxgidnmfxgsibb", "bab4wk4zanvqw42jaee"),
    "base32upper": ("BPFSXGIDNMFXGSIBB", "BAB4WK4ZANVQW42JAEE"),
    "base58btc": ("z7paNL19xttacUY", "z17paNL19xttacUY"),
    "base64": ("meWVzIG1hbmkgIQ", "mAHllcyBtYW5pICE"),
    "base64url": ("ueWVzIG1hbmkgIQ", "uAHllcyBtYW5pICE"),
    "base64urlpad": ("UeWVzIG1hbmkgIQ==", "UAHllcyBtYW5pICE="),
}


@pytest.mark.parametrize(("plain", "leading_zero"), FINAL.values(), ids=FINAL.keys())
def test_final_encodings(plain: str, leading_zero: str) -> None:
    assert multibase_decode(plain) == b"yes mani !"
    assert multibase_decode(leading_zero) == b"\x00yes mani !"


@pytest.mark.parametrize(
    "text",
    [
        "f68656c6c6f20776F726C64",
        "F68656c6c6f20776F726C64",
        "bnbswy3dpeB3W64TMMQ",
        "Bnbswy3dpeB3W64TMMQ",
    ],
)
def test_base16_and_base32_are_case_insensitive(text: str) -> None:
    assert multibase_decode(text) == b"hello world"


def test_draft_encodings_still_decode() -> None:
    assert multibase_decode("k2lcpzo5yikidynfl") == b"yes mani !"  # base36
    assert multibase_decode("cpfsxgidnmfxgsibb") == b"yes mani !"  # base32pad


SHA3_OF_MULTIHASH = "f162008c3792b2a4deed1bd7ea2328fb5de5531eccf0fbfa04a7d800cdc267137c635"


@pytest.mark.parametrize(
    "text",
    [
        SHA3_OF_MULTIHASH,
        "F" + SHA3_OF_MULTIHASH[1:].upper(),
        "zW1a3CNT52HXiJNniLkWMeev3CPRy9QiNRMWGyTrVNg4hY8",
    ],
)
def test_multihash_in_any_final_encoding(text: str) -> None:
    value = Multihash.from_multibase(text)
    assert value == Multihash.sha3_256(b"multihash")
    assert value.to_multibase() == SHA3_OF_MULTIHASH


STDLIB_ENCODINGS = {
    "base32": lambda b: "b" + base64.b32encode(b).decode().lower().rstrip("="),
    "base32upper": lambda b: "B" + base64.b32encode(b).decode().rstrip("="),
    "base64": lambda b: "m" + base64.b64encode(b).decode().rstrip("="),
    "base64url": lambda b: "u" + base64.urlsafe_b64encode(b).decode().rstrip("="),
    "base64urlpad": lambda b: "U" + base64.urlsafe_b64encode(b).decode(),
}


@pytest.mark.parametrize("encode", STDLIB_ENCODINGS.values(), ids=STDLIB_ENCODINGS.keys())
@pytest.mark.parametrize("size", range(6))
def test_rfc4648_encodings_of_every_tail_length(encode: Callable[[bytes], str], size: int) -> None:
    """Every padding case, and an ``arrow0-sha3-256`` multihash."""
    data = bytes(range(250, 250 - size, -1))
    assert multibase_decode(encode(data)) == data
    value = Multihash(0x300016, bytes(range(32)))
    assert Multihash.from_multibase(encode(value.to_bytes())) == value


def test_kamu_sha2_vector() -> None:
    value = Multihash.from_multibase("zQmYtUc4iTCbbfVSDNKvtQqrfyezPPnFvE33wFmutw9PBBk")
    assert value.code == 0x12
    assert value.to_multibase() == (
        "f12209cbc07c3f991725836a3aa2a581ca2029198aa420b9d99bc0e131d9f3e2cbe47"
    )


@pytest.mark.parametrize(
    "text",
    [
        "",
        "f 796573",  # whitespace
        "f79657",  # odd number of digits
        "fxyz0",
        "b1pfsx",  # not base32
        "bpfsxgidnmfxgsibb=",  # padding where there is none
        "z0OIl",  # not base58btc
        "meWVzIG1hbmkgIQ==",  # padding where there is none
        "meWVz_G1hbmkgIQ",  # url alphabet in base64
        "ueWVz+G1hbmkgIQ",  # standard alphabet in base64url
        "UeWVzIG1hbmkgIQ",  # missing padding
        "!abc",  # unknown encoding
    ],
)
def test_invalid_text_is_a_decode_error(text: str) -> None:
    with pytest.raises(DecodeError, match="multibase"):
        multibase_decode(text)
