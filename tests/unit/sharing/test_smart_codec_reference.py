"""The reference's dialect (``smart_codec_reference``) against the messages the reference's
own unit test states (``tests/fixtures/reference-smart/``, BSL 1.1: facts transcribed, see its
README): read by our clients, written alike by our server; hostile transfer headers refused;
each session's dialect told by its first message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from common.odf.identity import DatasetID
from common.odf.multihash import Multihash
from coordinator.sharing import smart_codec as sc
from coordinator.sharing import smart_messages as msg
from coordinator.sharing.errors import RejectedContentError
from coordinator.sharing.limits import Limits
from coordinator.sharing.objects import ObjectKind
from coordinator.sharing.smart_codec import Dialect, ObjectFile, Phase, Strategy, TransferUrl
from coordinator.sharing.smart_push_messages import PushRequest, SizeEstimation
from coordinator.sharing.smart_server import PullSession
from coordinator.sharing.transport_smart import transfer_headers
from tests.support.reference_smart_peer import serde
from tests.unit.sharing.test_transfer import source_dataset

FIXTURES = Path(__file__).parents[2] / "fixtures" / "reference-smart"
DATASET_URL = "http://node.example:8080/cities/"
REFERENCE = sc.codec(Dialect.REFERENCE)


def fixture() -> dict[str, Any]:
    text = (FIXTURES / "protocol_dataset_helpers.json").read_text()
    found: dict[str, Any] = json.loads(text.replace("{dataset_url}", DATASET_URL))
    return found


def test_the_strategies_of_the_reference_test_are_read_as_it_means_them() -> None:
    f = fixture()
    slice_hash = Multihash.from_multibase(f["new_slice"]["physical_hash"])
    checkpoint_hash = Multihash.from_multibase(f["new_checkpoint"]["physical_hash"])
    headers = (("x-odf-smtp-version", "1"), ("authorization", "Bearer some-token"))
    answer = {
        "Ok": {
            "object_transfer_strategies": [
                f["push_strategy_new_slice"],
                f["push_strategy_new_checkpoint"],
                f["push_strategy_existing_slice"],
            ]
        }
    }
    body = REFERENCE.answer(answer, Phase.PUSH_OBJECTS, "t")
    slice_file = ObjectFile(ObjectKind.DATA, slice_hash, 12345)
    checkpoint_file = ObjectFile(ObjectKind.CHECKPOINT, checkpoint_hash, 321)
    assert REFERENCE.read_strategies(body, Phase.PUSH_OBJECTS, "t") == [
        Strategy(slice_file, TransferUrl(f"{DATASET_URL}data/{slice_hash}", headers)),
        Strategy(
            checkpoint_file, TransferUrl(f"{DATASET_URL}checkpoints/{checkpoint_hash}", headers)
        ),
        Strategy(slice_file, None),
    ]
    pulls = {
        "object_transfer_strategies": [f["pull_strategy_slice"], f["pull_strategy_checkpoint"]]
    }
    (first, second) = REFERENCE.read_strategies(pulls, Phase.PULL_OBJECTS, "t")
    assert first.target is not None and second.target is not None
    # the node's credential goes to the node only
    assert transfer_headers(first.target, "http://node.example:8080/cities") == dict(headers)
    elsewhere = TransferUrl("http://store.example/x", headers)
    assert transfer_headers(elsewhere, "http://node.example:8080/cities") == {
        "x-odf-smtp-version": "1"
    }


def test_our_server_answers_as_the_reference_test_states(tmp_path: Path) -> None:
    f = fixture()
    ds = source_dataset(tmp_path / "src", 2)
    headers = (("x-odf-smtp-version", "1"), ("authorization", "Bearer some-token"))
    session = PullSession(ds, lambda kind, h: f"{DATASET_URL}{kind}/{h}", headers)
    request = {"begin_after": None, "stop_at": None, "force_update_if_diverged": False}
    assert "Ok" in session.handle(serde(request)).reply  # type: ignore[operator]
    session.handle("{}")
    asked = serde({"object_files": [f["new_slice"], f["new_checkpoint"]]})
    reply = session.handle(asked).reply
    expected = {
        "object_transfer_strategies": [f["pull_strategy_slice"], f["pull_strategy_checkpoint"]]
    }
    assert msg.encode(reply) == serde(expected)
    # and the push's strategies, written by the codec as the node writes them
    slice_file = REFERENCE.read_object_files({"object_files": [f["new_slice"]]}, "t", 1)[0]
    written = REFERENCE.strategies(
        [
            Strategy(
                slice_file, TransferUrl(f"{DATASET_URL}data/{slice_file.physical_hash}", headers)
            ),
            Strategy(slice_file, None),
        ],
        Phase.PUSH_OBJECTS,
    )
    assert msg.encode(written) == serde(
        {
            "object_transfer_strategies": [
                f["push_strategy_new_slice"],
                f["push_strategy_existing_slice"],
            ]
        }
    )


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        ([{"name": "Host", "value": "evil"}], "'Host' is not one a client sends"),
        ([{"name": "content-length", "value": "1"}], "is not one a client sends"),
        ([{"name": "x y", "value": "1"}], "is not one a client sends"),
        ([{"name": "x-a", "value": "1\r\nx-b: 2"}], "is not one a client sends"),
        ([{"name": "x-a", "value": 1}], "is not one a client sends"),
        ([{"name": f"x-{i}", "value": "1"} for i in range(17)], "not a short list"),
        ("x-a: 1", "not a short list"),
    ],
)
def test_hostile_transfer_headers_are_refused(headers: object, why: str) -> None:
    entry = {
        "object_file": fixture()["new_slice"],
        "pull_strategy": "HttpDownload",
        "download_from": {"url": "http://node/x", "headers": headers, "expires_at": None},
    }
    with pytest.raises(RejectedContentError) as e:
        REFERENCE.read_strategies({"object_transfer_strategies": [entry]}, Phase.PULL_OBJECTS, "t")
    assert why in str(e.value)


def test_requests_round_trip_and_read_as_serde_writes_them() -> None:
    h = Multihash.sha3_256(b"head")
    size = SizeEstimation(3, 2, 900, 800, 40)
    push = PushRequest(None, h, size, force=True, public=True)
    text = msg.encode(REFERENCE.push_request(push))
    assert text == (
        f'{{"current_head":"{h}","transfer_plan":{{"num_blocks":3,"num_objects":2,'
        '"num_records":40,"bytes_in_raw_blocks":900,"bytes_in_raw_objects":800},'
        '"force_update_if_diverged":true,"visibility_for_created_dataset":"Public"}'
    )
    assert REFERENCE.read_push_request(json.loads(text), "t", Limits()) == push
    pull = sc.PullRequest(h, None, False)
    assert REFERENCE.read_pull_request(REFERENCE.pull_request(pull), "t") == pull
    assert msg.encode(REFERENCE.pull_request(sc.PullRequest())) == (
        '{"begin_after":null,"stop_at":null,"force_update_if_diverged":false}'
    )


def test_each_session_is_told_by_its_first_message() -> None:
    did = DatasetID.from_did("did:odf:fed01" + "00" * 32).to_did()
    assert sc.detect_pull({}) is Dialect.SPEC
    assert sc.detect_pull({"beginAfter": None, "datasetId": did}) is Dialect.SPEC
    assert sc.detect_pull(REFERENCE.pull_request(sc.PullRequest())) is Dialect.REFERENCE
    assert sc.detect_push({"datasetId": did, "currentHead": None}) is Dialect.SPEC
    size = SizeEstimation(1, 0, 1, 0)
    assert (
        sc.detect_push(REFERENCE.push_request(PushRequest(None, None, size))) is Dialect.REFERENCE
    )
