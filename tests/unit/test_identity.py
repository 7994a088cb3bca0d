import pytest

from common.odf.errors import DecodeError
from common.odf.identity import DatasetID

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
    ["", "did:odf:", "did:key:fed01", "did:odf:fed01abcd", "did:odf:xyz", "did:odf:f1620" + "00" * 32],
)
def test_bad_did_is_a_clear_error(bad: str) -> None:
    with pytest.raises(DecodeError, match="did:odf"):
        DatasetID.from_did(bad)
