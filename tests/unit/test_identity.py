import re

import pytest
from Crypto.PublicKey import ECC
from hypothesis import given
from hypothesis import strategies as st
from multiformats import multibase

from common.odf.errors import DecodeError, ValidationError
from common.odf.identity import DatasetID
from common.odf.keys import (
    dataset_id_of_private_key,
    dataset_key_from_seed,
    generate_dataset_key,
)

SEEDED = {
    b"multihash": "did:odf:fed012126262ba49e1ba8392c26f7a39e1ba8d756c7469786d3365200c68402ff65dc",
    b"input1": "did:odf:fed01816ef0a9abe93aba816ef0a9abe93aba90e6065747170300c0d3d30c2cd8d7a4",
    b"input2": "did:odf:fed01826ef0a9abea3a3a826ef0a9abea3a3a90e6065747270300c1d3b30a2cd9d724",
    b"": "did:odf:fed01df230b49615d175307d580c33d6fda61fc7b9aec91df0f5c1a5ebe3b8cbfee02",
}


@pytest.mark.parametrize(("seed", "did"), SEEDED.items())
def test_seeded_ids_match_reference(seed: bytes, did: str) -> None:
    assert DatasetID.new_seeded(seed).to_did() == did


@pytest.mark.parametrize("did", SEEDED.values())
def test_did_round_trip(did: str) -> None:
    assert DatasetID.from_did(did).to_did() == did


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "did:odf:",
        "did:key:fed01",
        "did:odf:fed01abcd",
        "did:odf:xyz",
        "did:odf:f1620" + "00" * 32,
    ],
)
def test_bad_did_is_a_clear_error(bad: str) -> None:
    with pytest.raises(DecodeError, match="did:odf"):
        DatasetID.from_did(bad)


# -- did:odf in every multibase encoding, did:key ----------------------------------------------

# kamu-cli f92b4f25d test_dataset_id.rs / test_dataset_identity.rs
KAMU_DID_BASE16 = "did:odf:fed012e6fcce36701dc791488e0d0b1745cc1e33a4c1c9fcc41c63bd343dbbe0970e6"
KAMU_DID_KEY = "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"
KAMU_SEEDED_KEY_BASE58 = "did:odf:z6MkmgVreHBu2ABaD59Jq1J2JneXwzpsUWwEWXS4kLhjb4V4"

DID_FORMAT = re.compile(r"did:odf:fed01[0-9a-f]{64}")
ENCODINGS = [
    e.name for e in multibase.table() if e.name not in ("identity", "base256emoji", "proquint")
]


def test_kamu_did_key_vectors() -> None:
    base16 = DatasetID.from_did(KAMU_DID_BASE16)
    assert base16.to_did_key() == KAMU_DID_KEY
    assert DatasetID.parse("did:odf:" + KAMU_DID_KEY.removeprefix("did:key:")) == base16
    assert DatasetID.parse(KAMU_SEEDED_KEY_BASE58) == DatasetID.new_seeded(b"key")
    assert DatasetID.parse(KAMU_SEEDED_KEY_BASE58).to_did().startswith("did:odf:fed01")


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_did_is_parsed_in_every_multibase_encoding(encoding: str) -> None:
    dataset_id = DatasetID.new_seeded(b"input1")
    text = "did:odf:" + multibase.encode(dataset_id.to_bytes(), encoding)
    assert DatasetID.parse(text) == dataset_id
    assert DatasetID.parse(text).to_did() == SEEDED[b"input1"]  # always written as base16


@given(st.binary(min_size=32, max_size=32))
def test_any_public_key_round_trips_through_its_did(key: bytes) -> None:
    dataset_id = DatasetID.from_public_key(key)
    assert DID_FORMAT.fullmatch(dataset_id.to_did())
    assert dataset_id.to_did() == "did:odf:fed01" + key.hex()
    assert DatasetID.parse(dataset_id.to_did()) == dataset_id
    assert DatasetID.parse("did:odf:" + dataset_id.to_did_key()[8:]) == dataset_id
    assert DatasetID.from_bytes(dataset_id.to_bytes()) == dataset_id


@pytest.mark.parametrize(
    "bad",
    [
        "did:odf:fe701" + "00" * 32,  # secp256k1-pub multicodec, not ed25519-pub
        "did:odf:fed01" + "00" * 31,  # short key
        "did:odf:fed01" + "00" * 33,  # long key
        "did:odf:zzzz0",  # '0' is not in the base58 alphabet
        "did:odf:" + "fed01" + "00" * 31 + "0",  # odd number of hex digits
    ],
)
def test_malformed_dids_are_decode_errors(bad: str) -> None:
    with pytest.raises(DecodeError, match=re.escape(repr(bad))):
        DatasetID.parse(bad)


# -- ed25519 key pairs ------------------------------------------------------------------------

# RFC 8032 section 7.1, TEST 1 and TEST 2: secret key -> public key
RFC8032 = [
    (
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
    ),
    (
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
    ),
]


@pytest.mark.parametrize(("secret", "public"), RFC8032)
def test_dataset_id_is_the_ed25519_public_key(secret: str, public: str) -> None:
    pem, dataset_id = dataset_key_from_seed(bytes.fromhex(secret))
    assert dataset_id.to_did() == "did:odf:fed01" + public
    assert dataset_id_of_private_key(pem) == dataset_id


def test_generated_keys_are_fresh_and_restorable() -> None:
    pem1, id1 = generate_dataset_key()
    pem2, id2 = generate_dataset_key()
    assert id1 != id2
    assert pem1.startswith(b"-----BEGIN PRIVATE KEY-----")
    for pem, dataset_id in ((pem1, id1), (pem2, id2)):
        assert DID_FORMAT.fullmatch(dataset_id.to_did())
        assert dataset_id_of_private_key(pem) == dataset_id
        assert dataset_id_of_private_key(pem.decode()) == dataset_id


def test_bad_private_keys_are_validation_errors() -> None:
    p256 = ECC.generate(curve="P-256").export_key(format="PEM")
    with pytest.raises(ValidationError, match="expected an ed25519 private key"):
        dataset_id_of_private_key(p256)
    public_only = ECC.generate(curve="Ed25519").public_key().export_key(format="PEM")
    with pytest.raises(ValidationError, match="got only a public key"):
        dataset_id_of_private_key(public_only)
    with pytest.raises(ValidationError, match="not a PEM-encoded ed25519 private key"):
        dataset_id_of_private_key(b"-----BEGIN PRIVATE KEY-----\ngarbage\n")
    with pytest.raises(ValidationError, match="must be 32 bytes"):
        dataset_key_from_seed(b"short")
