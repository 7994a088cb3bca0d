"""The Smart Transfer Protocol's push flow, server side, in process over real datasets: hostile
push messages are refused; a session answers in order, takes only the uploads it asked for,
checked as they arrive; its commit is a compare-and-swap against the head the client expected;
a refused push leaves the server's dataset (or the absence of one) exactly as it was. The
session's tests run in both dialects (``smart_codec``)."""

from __future__ import annotations

import dataclasses
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
from coordinator.sharing import smart_push_messages as push_msg
from coordinator.sharing.errors import RejectedContentError
from coordinator.sharing.limits import Limits
from coordinator.sharing.objects import ObjectKind
from coordinator.sharing.smart_codec import Dialect, ObjectFile, Phase, Strategy, Turn, codec
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
    """One push session into the dataset ``cities`` of a workspace, spoken in ``dialect``."""

    def __init__(self, ws: Workspace, key: str = "s1", dialect: str = "spec") -> None:
        self.ws = ws
        self.codec = codec(Dialect(dialect))
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
        assert isinstance(reply, dict), reply
        return self.codec.answer(
            reply, PHASES.get(next(iter(message), ""), Phase.PUSH_OBJECTS), "t"
        )

    def request(self, src: Dataset, current: Multihash | None, force: bool = False) -> None:
        size = push_msg.SizeEstimation(1, 0, 1, 0)
        message = self.codec.push_request(push_msg.PushRequest(src.id, current, size, force))
        assert self.ask(message) == {}

    def batch(self, src: Dataset, after: Multihash | None = None) -> dict[str, Any]:
        blocks = []
        for h, _ in src.iter_blocks():
            if h == after:
                break
            blocks.append((h, src.get_block_bytes(h)))
        return self.codec.metadata(blocks, Phase.PUSH_METADATA)

    def strategies(self, src: Dataset, after: Multihash | None = None) -> list[Strategy]:
        """The answer to a request for the data files of ``src``'s blocks after ``after``."""
        files = []
        for h, block in src.iter_blocks():
            if h == after:
                break
            new_data = getattr(block.event, "new_data", None)
            if new_data is not None:
                files.append(ObjectFile(ObjectKind.DATA, new_data.physical_hash, new_data.size))
        reply = self.ask(self.codec.object_files(files, Phase.PUSH_OBJECTS))
        return self.codec.read_strategies(reply, Phase.PUSH_OBJECTS, "t")

    def complete(self) -> Turn:
        """The uploads said done (the reference's: no answer), then ``DatasetPushComplete``."""
        done = self.codec.uploads_done()
        if done is not None:
            assert self.session.handle(json.dumps(done)) == Turn(None)
        return self.session.handle("{}")

    def refused(self, message: dict[str, Any] | None) -> str:
        """The refusal of ``message`` (``None``: of the completion), in one line."""
        turn = self.complete() if message is None else self.session.handle(json.dumps(message))
        self.session.close()
        assert turn.done, turn
        reply = turn.reply
        if isinstance(reply, str):  # the reference's, where any object reads as success
            return reply
        assert isinstance(reply, dict), reply
        if "errorDetails" in reply:
            details = reply["errorDetails"]
            return f"{details['errorCode']}: {details['description']}"
        ((variant, fields),) = reply["Err"].items()
        return f"{variant}: {fields.get('error_message', json.dumps(fields))}"

    def upload(self, src: Dataset, strategy: Strategy, content: bytes | None = None) -> None:
        h = strategy.file.physical_hash
        data = content if content is not None else src.data_path(h).read_bytes()
        self.session.receive(strategy.file.kind, h, len(data), io.BytesIO(data).read)

    def dataset(self) -> Dataset | None:
        try:
            return self.ws.open_dataset("cities")
        except NotFoundError:
            return None


PHASES = {
    "newBlocks": Phase.PUSH_METADATA,
    "new_blocks": Phase.PUSH_METADATA,
    "datasetId": Phase.PUSH_REQUEST,
    "current_head": Phase.PUSH_REQUEST,
}
CONFLICT = {"spec": "Conflict: ", "reference": "InvalidHead: "}


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace.init(tmp_path / "server")


@pytest.fixture
def src(tmp_path: Path) -> Dataset:
    """The pushing side's dataset: one slice."""
    return source_dataset(tmp_path / "src", 1)


@pytest.fixture(params=["spec", "reference"])
def dialect(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def served(ws: Workspace, src: Dataset) -> Dataset:
    """The server's dataset ``cities``, a clone of ``src``."""
    ds = Dataset(ws.datasets_dir / "cities")
    sync(ds, source_of(src), "cities", Options())
    return ws.open_dataset("cities")


def served_behind(ws: Workspace, src: Dataset) -> tuple[Dataset, Multihash]:
    """The server's clone of ``src`` and its head, ``src`` then one slice ahead of it."""
    ds = served(ws, src)
    base = src.head()
    append_slices(src, 1, 1)
    return ds, base


def test_a_push_creates_the_dataset_and_uploads_only_what_is_asked(
    tmp_path: Path, ws: Workspace, dialect: str
) -> None:
    src = source_dataset(tmp_path / "src", 2)
    server = Server(ws, dialect=dialect)
    server.request(src, None)
    assert server.ask(server.batch(src)) == {}
    strategies = server.strategies(src)
    assert all(s.target is not None for s in strategies) and len(strategies) == 2
    assert strategies[0].target is not None
    assert strategies[0].target.url.startswith("http://server/cities/push/s1/data/")
    for s in strategies:
        server.upload(src, s)
    with pytest.raises(UploadRefusedError, match="uploaded already"):
        server.upload(src, strategies[0])
    turn = server.complete()
    assert (turn.reply, turn.done) == ({}, True)
    server.session.close()
    pushed = server.dataset()
    assert pushed is not None and pushed.head() == src.head()
    assert files_of(pushed) == files_of(src) and server.commits == ["cities"]
    assert not server.stage.exists()


def test_a_refused_push_of_a_new_dataset_leaves_nothing(
    src: Dataset, ws: Workspace, dialect: str
) -> None:
    server = Server(ws, dialect=dialect)
    server.request(src, None)
    server.ask(server.batch(src))
    (strategy,) = server.strategies(src)
    path = src.data_path(strategy.file.physical_hash)
    with pytest.raises(RejectedContentError, match="content was changed"):
        server.upload(src, strategy, b"x" * path.stat().st_size)
    with pytest.raises(RejectedContentError, match="names"):  # a wrong size: before any byte
        server.upload(src, strategy, b"x")
    assert "1 objects were not uploaded" in server.refused(None)
    assert server.dataset() is None and server.commits == []
    assert list(ws.datasets_dir.iterdir()) == [] and not server.stage.exists()


def test_the_commit_is_a_compare_and_swap_on_the_expected_head(
    src: Dataset, ws: Workspace, dialect: str
) -> None:
    ds, base = served_behind(ws, src)
    # a client that read another head is refused at once
    older = next(h for h, _ in src.iter_blocks() if h not in (src.head(), base))
    first = Server(ws, "s0", dialect)
    message = first.codec.push_request(
        push_msg.PushRequest(src.id, older, push_msg.SizeEstimation(1, 0, 1, 0))
    )
    assert CONFLICT[dialect] in first.refused(message)

    # the server's head moves during the session (the daemon ingests): the commit is refused
    server = Server(ws, dialect=dialect)
    server.request(src, base)
    server.ask(server.batch(src, after=base))
    for s in server.strategies(src, after=base):
        server.upload(src, s)
    append_slices(ds, 1, 2)
    before = (ds.head(), files_of(ds))
    assert "moved since the client read it" in server.refused(None)
    assert (ds.head(), files_of(ds)) == before and server.commits == []


def test_a_pushed_chain_must_extend_the_servers(
    tmp_path: Path, src: Dataset, ws: Workspace, dialect: str
) -> None:
    other = source_dataset(tmp_path / "other", 1, name=b"other")
    ds = served(ws, src)
    before = files_of(ds)
    if dialect == "spec":  # the reference's request names no dataset: its Seed says it
        first = Server(ws, "s0")
        size = push_msg.SizeEstimation(1, 0, 1, 0)
        message = first.codec.push_request(push_msg.PushRequest(other.id, src.head(), size))
        error = first.refused(message)
        assert f"on the server is {src.id.to_did()}, not {other.id.to_did()}" in error
    server = Server(ws, "s1", dialect)
    server.request(src, src.head())
    assert "another dataset's chain" in server.refused(server.batch(other))
    base = src.head()
    append_slices(src, 1, 1)
    server = Server(ws, "s2", dialect)
    server.request(src, base)
    server.ask(server.batch(src, after=base))
    foreign = ObjectFile(ObjectKind.DATA, Multihash.from_multibase(H), 1)
    error = server.refused(server.codec.object_files([foreign], Phase.PUSH_OBJECTS))
    assert "not named by the pushed blocks" in error
    assert files_of(ds) == before and ds.head() == base


def test_a_forced_push_replaces_a_diverged_head(src: Dataset, ws: Workspace, dialect: str) -> None:
    ds = served(ws, src)
    common = src.head()
    with ds.staging_dir() as staging:  # the server went its own way
        f = write_slice(staging, 10, 10, name="theirs")
        ds.commit(add_data_for(f, 9, 10, 10), data_file=f, expected_head=common, system_time=at(9))
    append_slices(src, 1, 1)
    server_head = ds.head()
    server = Server(ws, "s1", dialect)
    server.request(src, server_head)
    error = server.refused(server.batch(src, after=common))
    assert "diverged" in error and str(server_head) in error and str(common) in error
    server = Server(ws, "s2", dialect)
    server.request(src, server_head, force=True)
    server.ask(server.batch(src, after=common))
    for s in server.strategies(src, after=common):
        server.upload(src, s)
    assert server.complete().reply == {}
    assert ds.head() == src.head() and files_of(ds) == files_of(src)


def test_a_forced_push_of_blocks_the_server_has_changes_nothing(
    src: Dataset, ws: Workspace, dialect: str
) -> None:
    ds = served(ws, src)
    older = src.head()
    append_slices(ds, 1, 1)  # the server is ahead of what is pushed
    before = (ds.head(), files_of(ds))
    server = Server(ws, dialect=dialect)
    server.request(src, ds.head(), force=True)
    assert "the server has every pushed block" in server.refused(server.batch(src))
    assert (ds.head(), files_of(ds)) == before and older != ds.head()


def test_a_changed_block_in_the_pushed_batch_is_refused(
    src: Dataset, ws: Workspace, dialect: str
) -> None:
    ds, base = served_behind(ws, src)
    before = (ds.head(), files_of(ds))
    (new,) = [(h, src.get_block_bytes(h)) for h, _ in src.iter_blocks() if h != base][:1]
    changed = bytearray(new[1])
    changed[len(changed) // 2] ^= 0xFF
    server = Server(ws, dialect=dialect)
    server.request(src, base)
    error = server.refused(server.codec.metadata([(new[0], bytes(changed))], Phase.PUSH_METADATA))
    assert f"blocks/{new[0]}: its bytes hash to" in error and "the block was changed" in error
    assert (ds.head(), files_of(ds)) == before and not server.stage.exists()


def test_an_upload_in_progress_keeps_its_session_alive(
    src: Dataset, ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reference's client says nothing on the WebSocket while it uploads: the session is
    told of the upload's progress (the daemon then resets its idle deadline)."""
    import coordinator.sharing.smart_push_server as server_module

    monkeypatch.setattr(server_module, "CHUNK_BYTES", 64)
    monkeypatch.setattr(server_module, "UPLOAD_TOUCH_S", 0.0)
    server = Server(ws, dialect="reference")
    touches: list[int] = []
    server.session.ctx = dataclasses.replace(
        server.session.ctx, on_upload=lambda: touches.append(1)
    )
    server.request(src, None)
    server.ask(server.batch(src))
    (strategy,) = server.strategies(src)
    size = src.data_path(strategy.file.physical_hash).stat().st_size
    server.upload(src, strategy)
    assert len(touches) >= size // 64
    assert server.complete().reply == {}
