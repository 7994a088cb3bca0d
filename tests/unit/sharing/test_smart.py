"""The Smart Transfer Protocol's pull messages: the metadata batch read as hostile input, and
the server's session answering in order and refusing anything else."""

from __future__ import annotations

import base64
import gzip
import io
import json
import tarfile
from pathlib import Path

import pytest

from common.odf.multihash import Multihash
from coordinator.sharing import smart_messages as msg
from coordinator.sharing.errors import RejectedContentError
from coordinator.sharing.limits import Limits
from coordinator.sharing.smart_server import PullSession
from tests.unit.sharing.test_transfer import source_dataset

H = "f1620" + "ab" * 32


def batch_of(members: list[tarfile.TarInfo], data: bytes = b"x", count: int | None = None) -> dict:
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb") as z, tarfile.open(fileobj=z, mode="w") as tar:
        for m in members:
            tar.addfile(m, io.BytesIO(data) if m.isreg() else None)
    return {
        "objectsCount": len(members) if count is None else count,
        "objectType": "MetadataBlock",
        "mediaType": msg.TAR_GZIP,
        "encoding": msg.BASE64,
        "payload": base64.b64encode(buffer.getvalue()).decode(),
    }


def member(name: str, size: int = 1, kind: bytes = tarfile.REGTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size if kind == tarfile.REGTYPE else 0
    info.type = kind
    if kind == tarfile.SYMTYPE:
        info.linkname = "/etc/passwd"
    return info


def test_a_batch_round_trips() -> None:
    blocks = [(Multihash.from_multibase(H), b"block bytes")]
    assert msg.read_blocks_batch(msg.blocks_batch(blocks), "r", Limits()) == dict(blocks)


@pytest.mark.parametrize(
    ("batch", "why"),
    [
        (batch_of([member("../../etc/passwd")]), "is not a block name"),
        (batch_of([member(f"blocks/{H}")]), "is not a block name"),
        (batch_of([member(H.upper())]), "is not a block name"),
        (batch_of([member(H, kind=tarfile.SYMTYPE)]), "is not a file"),
        (batch_of([member(H, kind=tarfile.DIRTYPE)]), "is not a file"),
        (batch_of([member(H)], count=5), "says 5 blocks, it has 1"),
        (batch_of([member(H, 200)], b"x" * 200), "larger than 100 bytes"),
        ({**batch_of([member(H)]), "payload": "not base64!"}, "not base64 tar+gzip"),
        ({**batch_of([member(H)]), "mediaType": "application/zip"}, "unsupported batch"),
        ("a string", "not an ObjectsBatch"),
    ],
)
def test_hostile_batches_are_refused(batch: object, why: str) -> None:
    with pytest.raises(RejectedContentError) as e:
        msg.read_blocks_batch(batch, "remote", Limits(max_block_bytes=100))
    assert why in str(e.value)


def test_a_gzip_bomb_of_zeros_after_the_archive_is_refused_as_such() -> None:
    bomb = gzip.compress(b"\0" * (8 << 20))
    batch = {**batch_of([]), "payload": base64.b64encode(bomb).decode()}
    with pytest.raises(RejectedContentError, match="the batch has data after its tar archive"):
        msg.read_blocks_batch(batch, "remote", Limits())


def test_a_batch_inflating_past_the_limit_is_cut_off_while_unpacking() -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for i in range(64):  # 64 blocks of 1 MiB of zeros: 64 MiB, a few hundred KiB zipped
            h = Multihash.sha3_256(str(i).encode())
            info = tarfile.TarInfo(h.to_multibase())
            info.size = 1 << 20
            tar.addfile(info, io.BytesIO(bytes(1 << 20)))
    payload = base64.b64encode(gzip.compress(buffer.getvalue())).decode()
    batch = {**batch_of([]), "objectsCount": 64, "payload": payload}
    limits = Limits(max_block_bytes=2 << 20, max_batch_bytes=4 << 20)
    with pytest.raises(
        RejectedContentError,
        match=r"^remote: the metadata batch inflates past 4194304 bytes \(refused while unpacking",
    ):
        msg.read_blocks_batch(batch, "remote", limits)


DEEP = '{"datasetId": ' + "[" * 100_000 + "]" * 100_000 + "}"
"""A message past Python's recursion limit (``json.loads`` raised RecursionError)."""


@pytest.mark.parametrize("text", [DEEP, DEEP.encode(), DEEP.replace("[", "[\n")])
def test_a_message_nested_too_deeply_is_refused_before_it_is_parsed(text: str | bytes) -> None:
    with pytest.raises(RejectedContentError) as e:
        msg.decode(text, "ws://h/src")
    assert str(e.value) == (
        "ws://h/src: not a JSON message: nested deeper than 512 arrays and objects"
    )


def test_the_server_answers_the_pull_flow_in_order(tmp_path: Path) -> None:
    ds = source_dataset(tmp_path / "src", 2)
    session = PullSession(ds, lambda kind, h: f"http://h/src/{kind}/{h}")
    turn = session.handle(msg.encode({"datasetId": ds.id.to_did()}))
    reply, done = turn.reply, turn.done
    assert not done and reply["sizeEstimation"]["numBlocks"] == 4
    assert reply["sizeEstimation"]["numObjects"] == 2
    turn = session.handle("{}")
    reply, done = turn.reply, turn.done
    blocks = msg.read_blocks_batch(reply["blocks"], "r", Limits())
    assert set(blocks) == {h for h, _ in ds.iter_blocks()}
    data = next(ds.layout.data_dir.iterdir()).name
    turn = session.handle(
        json.dumps({"objectFiles": [{"objectType": "DataSlice", "physicalHash": data}]})
    )
    reply, done = turn.reply, turn.done
    assert reply["objectTransferStrategies"][0]["downloadFrom"]["url"] == (
        f"http://h/src/data/{data}"
    )


@pytest.mark.parametrize(
    "first",
    [
        "not json",
        json.dumps({"datasetId": "did:odf:fed01" + "00" * 32}),
        json.dumps({"beginAfter": H}),
        json.dumps({"stopAt": 5}),
        DEEP,
    ],
)
def test_the_server_ends_a_bad_session_with_an_error(tmp_path: Path, first: str) -> None:
    session = PullSession(source_dataset(tmp_path / "src", 1), lambda kind, h: "")
    turn = session.handle(first)
    reply, done = turn.reply, turn.done
    assert done and reply["errorDetails"]["errorCode"] == "BadRequest"
