"""The Smart Transfer Protocol's push flow, server side, in process over real datasets: hostile
push messages are refused; a session answers in order, takes only the uploads it asked for,
checked as they arrive; its commit is a compare-and-swap against the head the client expected;
a refused push leaves the server's dataset (or the absence of one) exactly as it was."""

from __future__ import annotations

import io
import json
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

from common.odf.errors import NotFoundError
from common.odf.identity import DatasetID
from common.odf.multihash import Multihash
from coordinator.dataset import Dataset
from coordinator.sharing import smart_messages as msg
from coordinator.sharing import smart_push_messages as push_msg
from coordinator.sharing.errors import RejectedContentError
from coordinator.sharing.limits import Limits
from coordinator.sharing.objects import ObjectKind
from coordinator.sharing.smart_push_server import PushContext, PushSession, UploadRefusedError
from coordinator.sharing.transfer import Options, sync
from coordinator.workspace import Workspace
from tests.unit.coordinator.events import add_data_for, at, write_slice
from tests.unit.sharing.test_transfer import append_slices, files_of, source_dataset, source_of

H = "f1620" + "ab" * 32
DID = "did:odf:fed01" + "00" * 32
SIZE = {"numBlocks": 1, "numObjects": 0, "bytesInRawBlocks": 1, "bytesInRawObjects": 0}


@pytest.mark.parametrize(
    ("message", "why"),
    [
        ({"currentHead": None, "sizeEstimation": SIZE}, "has no datasetId"),
        ({"datasetId": "did:odf:../../x", "sizeEstimation": SIZE}, "is not a did:odf"),
        ({"datasetId": DID, "currentHead": H.upper(), "sizeEstimation": SIZE}, "not a multihash"),
        ({"datasetId": DID, "currentHead": 7, "sizeEstimation": SIZE}, "not a multihash"),
        ({"datasetId": DID, "currentHead": "../refs/head", "sizeEstimation": SIZE}, "multihash"),
        ({"datasetId": DID}, "not a TransferSizeEstimation"),
        ({"datasetId": DID, "sizeEstimation": {**SIZE, "numObjects": -1}}, "not a count"),
        ({"datasetId": DID, "sizeEstimation": {**SIZE, "numObjects": True}}, "not a count"),
        ({"datasetId": DID, "sizeEstimation": {**SIZE, "numObjects": "1"}}, "not a count"),
        ({"datasetId": DID, "sizeEstimation": {**SIZE, "numBlocks": 0}}, "at least 1"),
        ({"datasetId": DID, "sizeEstimation": {**SIZE, "numBlocks": 11}}, "over the limit"),
        ({"datasetId": DID, "sizeEstimation": SIZE, "forceUpdateIfDiverged": "yes"}, "boolean"),
    ],
)
def test_hostile_push_requests_are_refused(message: dict[str, Any], why: str) -> None:
    with pytest.raises(RejectedContentError) as e:
        push_msg.parse_push_request(message, "push", Limits(max_new_blocks=10))
    assert why in str(e.value)


def test_a_push_request_round_trips() -> None:
    request = push_msg.PushRequest(
        DatasetID.from_did(DID), Multihash.from_multibase(H), push_msg.SizeEstimation(3, 2, 9, 8)
    )
    assert push_msg.parse_push_request(request.to_json(), "push", Limits()) == request


@pytest.mark.parametrize(
    ("files", "why"),
    [
        ("all of them", "not a list"),
        ([{"objectType": "DataSlice", "physicalHash": H}] * 3, "3 object files asked for"),
        (["data/x"], "not an ObjectFileReference"),
        ([{"objectType": "MetadataBlock", "physicalHash": H}], "cannot be uploaded"),
        ([{"objectType": "DataSlice", "physicalHash": "../../etc/passwd"}], "not a multihash"),
        ([{"objectType": "Checkpoint"}], "not a multihash"),
    ],
)
def test_hostile_object_requests_are_refused(files: object, why: str) -> None:
    with pytest.raises(RejectedContentError) as e:
        push_msg.parse_object_files({"objectFiles": files}, "push", 2)
    assert why in str(e.value)


# --- the session ---------------------------------------------------------------------------


class Server:
    """One push session into the dataset ``cities`` of a workspace."""

    def __init__(self, ws: Workspace, key: str = "s1") -> None:
        self.ws = ws
        self.commits: list[str] = []
        self.stage = ws.odf_dir / "run" / "push" / key
        self.stage.mkdir(parents=True)
        self.session = PushSession(
            PushContext(
                workspace=ws,
                name="cities",
                stage=self.stage,
                upload_url=lambda kind, h: f"http://server/cities/push/{key}/{kind.value}/{h}",
                hold=lambda name: nullcontext(),
                on_commit=self.commits.append,
                limits=Limits(),
            )
        )

    def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        reply = self.session.handle(json.dumps(message)).reply
        assert "errorDetails" not in reply, reply
        return reply

    def refused(self, message: dict[str, Any]) -> str:
        turn = self.session.handle(json.dumps(message))
        reply, done = turn.reply, turn.done
        self.session.close()
        assert done and "errorDetails" in reply, reply
        details = reply["errorDetails"]
        return f"{details['errorCode']}: {details['description']}"

    def upload(self, src: Dataset, strategy: dict[str, Any], content: bytes | None = None) -> None:
        assert strategy["objectFile"]["objectType"] == "DataSlice"
        h = Multihash.from_multibase(strategy["objectFile"]["physicalHash"])
        data = content if content is not None else src.data_path(h).read_bytes()
        self.session.receive(ObjectKind.DATA, h, len(data), io.BytesIO(data).read)

    def dataset(self) -> Dataset | None:
        try:
            return self.ws.open_dataset("cities")
        except NotFoundError:
            return None


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace.init(tmp_path / "server")


def served(ws: Workspace, src: Dataset) -> Dataset:
    """The server's dataset ``cities``, a clone of ``src``."""
    ds = Dataset(ws.datasets_dir / "cities")
    sync(ds, source_of(src), "cities", Options())
    return ws.open_dataset("cities")


def request(src: Dataset, current: Multihash | None, force: bool = False) -> dict[str, Any]:
    size = push_msg.SizeEstimation(1, 0, 1, 0)
    return push_msg.PushRequest(src.id, current, size, force).to_json()


def batch(src: Dataset, after: Multihash | None = None) -> dict[str, Any]:
    blocks = []
    for h, _ in src.iter_blocks():
        if h == after:
            break
        blocks.append((h, src.get_block_bytes(h)))
    return {"newBlocks": msg.blocks_batch(blocks)}


def data_files(src: Dataset, after: Multihash | None = None) -> dict[str, Any]:
    files = []
    for h, block in src.iter_blocks():
        if h == after:
            break
        new_data = getattr(block.event, "new_data", None)
        if new_data is not None:
            files.append(push_msg.object_file(ObjectKind.DATA, new_data.physical_hash))
    return {"objectFiles": files}


def test_a_push_creates_the_dataset_and_uploads_only_what_is_asked(
    tmp_path: Path, ws: Workspace
) -> None:
    src = source_dataset(tmp_path / "src", 2)
    server = Server(ws)
    assert server.ask(request(src, None)) == {}
    assert server.ask(batch(src)) == {}
    strategies = server.ask(data_files(src))["objectTransferStrategies"]
    assert [s["pushStrategy"] for s in strategies] == ["HttpUpload", "HttpUpload"]
    assert strategies[0]["uploadTo"]["url"].startswith("http://server/cities/push/s1/data/")
    for s in strategies:
        server.upload(src, s)
    with pytest.raises(UploadRefusedError, match="uploaded already"):
        server.upload(src, strategies[0])
    turn = server.session.handle("{}")  # DatasetPushComplete
    reply, done = turn.reply, turn.done
    assert (reply, done) == ({}, True)
    server.session.close()
    pushed = server.dataset()
    assert pushed is not None and pushed.head() == src.head()
    assert files_of(pushed) == files_of(src) and server.commits == ["cities"]
    assert not server.stage.exists()


def test_a_refused_push_of_a_new_dataset_leaves_nothing(tmp_path: Path, ws: Workspace) -> None:
    src = source_dataset(tmp_path / "src", 1)
    server = Server(ws)
    server.ask(request(src, None))
    server.ask(batch(src))
    (strategy,) = server.ask(data_files(src))["objectTransferStrategies"]
    path = src.data_path(Multihash.from_multibase(strategy["objectFile"]["physicalHash"]))
    with pytest.raises(RejectedContentError, match="content was changed"):
        server.upload(src, strategy, b"x" * path.stat().st_size)
    with pytest.raises(RejectedContentError, match="names"):  # a wrong size: before any byte
        server.upload(src, strategy, b"x")
    assert "1 objects were not uploaded" in server.refused({})
    assert server.dataset() is None and server.commits == []
    assert list(ws.datasets_dir.iterdir()) == [] and not server.stage.exists()


def test_the_commit_is_a_compare_and_swap_on_the_expected_head(
    tmp_path: Path, ws: Workspace
) -> None:
    src = source_dataset(tmp_path / "src", 1)
    ds = served(ws, src)
    base = src.head()
    append_slices(src, 1, 1)
    # a client that read another head is refused at once
    older = next(h for h, _ in src.iter_blocks() if h not in (src.head(), base))
    assert "Conflict: " in Server(ws, "s0").refused(request(src, older))

    # the server's head moves during the session (the daemon ingests): the commit is refused
    server = Server(ws)
    server.ask(request(src, base))
    server.ask(batch(src, after=base))
    for s in server.ask(data_files(src, after=base))["objectTransferStrategies"]:
        server.upload(src, s)
    append_slices(ds, 1, 2)
    before = (ds.head(), files_of(ds))
    assert "moved since the client read it" in server.refused({})
    assert (ds.head(), files_of(ds)) == before and server.commits == []


def test_a_pushed_chain_must_extend_the_servers(tmp_path: Path, ws: Workspace) -> None:
    src = source_dataset(tmp_path / "src", 1)
    other = source_dataset(tmp_path / "other", 1, name=b"other")
    ds = served(ws, src)
    before = files_of(ds)
    error = Server(ws, "s0").refused(request(other, src.head()))
    assert f"on the server is {src.id.to_did()}, not {other.id.to_did()}" in error
    server = Server(ws, "s1")
    server.ask(request(src, src.head()))
    assert "another dataset's chain" in server.refused(batch(other))
    base = src.head()
    append_slices(src, 1, 1)
    server = Server(ws, "s2")
    server.ask(request(src, base))
    server.ask(batch(src, after=base))
    foreign = {"objectFiles": [{"objectType": "DataSlice", "physicalHash": H}]}
    assert "not named by the pushed blocks" in server.refused(foreign)
    assert files_of(ds) == before and ds.head() == base


def test_a_forced_push_replaces_a_diverged_head(tmp_path: Path, ws: Workspace) -> None:
    src = source_dataset(tmp_path / "src", 1)
    ds = served(ws, src)
    common = src.head()
    with ds.staging_dir() as staging:  # the server went its own way
        f = write_slice(staging, 10, 10, name="theirs")
        ds.commit(add_data_for(f, 9, 10, 10), data_file=f, expected_head=common, system_time=at(9))
    append_slices(src, 1, 1)
    server_head = ds.head()
    server = Server(ws, "s1")
    server.ask(request(src, server_head))
    error = server.refused(batch(src, after=common))
    assert "diverged" in error and str(server_head) in error and str(common) in error
    server = Server(ws, "s2")
    server.ask(request(src, server_head, force=True))
    server.ask(batch(src, after=common))
    for s in server.ask(data_files(src, after=common))["objectTransferStrategies"]:
        server.upload(src, s)
    assert server.ask({}) == {}
    assert ds.head() == src.head() and files_of(ds) == files_of(src)


def test_a_forced_push_of_blocks_the_server_has_changes_nothing(
    tmp_path: Path, ws: Workspace
) -> None:
    src = source_dataset(tmp_path / "src", 1)
    ds = served(ws, src)
    older = src.head()
    append_slices(ds, 1, 1)  # the server is ahead of what is pushed
    before = (ds.head(), files_of(ds))
    server = Server(ws)
    server.ask(request(src, ds.head(), force=True))
    assert "the server has every pushed block" in server.refused(batch(src))
    assert (ds.head(), files_of(ds)) == before and older != ds.head()


def test_a_changed_block_in_the_pushed_batch_is_refused(tmp_path: Path, ws: Workspace) -> None:
    src = source_dataset(tmp_path / "src", 1)
    ds = served(ws, src)
    base = src.head()
    append_slices(src, 1, 1)
    before = (ds.head(), files_of(ds))
    (new,) = [(h, src.get_block_bytes(h)) for h, _ in src.iter_blocks() if h != base][:1]
    changed = bytearray(new[1])
    changed[len(changed) // 2] ^= 0xFF
    server = Server(ws)
    server.ask(request(src, base))
    error = server.refused({"newBlocks": msg.blocks_batch([(new[0], bytes(changed))])})
    assert f"blocks/{new[0]}: its bytes hash to" in error and "the block was changed" in error
    assert (ds.head(), files_of(ds)) == before and not server.stage.exists()
