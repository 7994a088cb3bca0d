"""``odf pull odf+http://`` against a hostile smart server (a real WebSocket server on
loopback): every probe is refused in one line that names the limit, and nothing is left in the
workspace."""

from __future__ import annotations

import base64
import gzip
import io
import json
import tarfile
from pathlib import Path

import pytest
from websockets.sync.server import ServerConnection

from common.odf.errors import OdfError
from common.odf.multihash import Multihash
from coordinator.app.sharing import Sharing
from coordinator.sharing import smart_messages as msg
from coordinator.sharing.limits import Limits
from coordinator.sharing.smart_codec import Dialect, Phase, Strategy, TransferUrl, codec
from coordinator.sharing.transfer import Options
from coordinator.workspace import Workspace
from tests.support.hostile_smart_server import Scenario, hostile_smart_server
from tests.unit.sharing.test_transfer import source_dataset

LIMITS = Limits(max_message_bytes=1 << 20, max_block_bytes=2 << 20, max_batch_bytes=4 << 20)


def blocks(dialect: str, payload: bytes, count: int) -> str:
    """The metadata answer of ``dialect`` with a tar+gzip ``payload`` said to hold ``count``
    blocks."""
    if dialect == "spec":
        encoded = base64.b64encode(payload).decode()
        return msg.encode(
            {"blocks": {**msg.blocks_batch([]), "objectsCount": count, "payload": encoded}}
        )
    batch = {"num_blocks": count, "media_type": msg.TAR_GZIP, "encoding": "raw"}
    return msg.encode({"blocks": {**batch, "payload": list(payload)}})


def oversized(ws: ServerConnection, base: str, dialect: str) -> None:
    ws.send("x" * (2 << 20))


def inflating(ws: ServerConnection, base: str, dialect: str) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for i in range(64):
            info = tarfile.TarInfo(Multihash.sha3_256(bytes([i])).to_multibase())
            info.size = 1 << 20
            tar.addfile(info, io.BytesIO(bytes(1 << 20)))
    ws.send(blocks(dialect, gzip.compress(buffer.getvalue()), 64))


def zeros(ws: ServerConnection, base: str, dialect: str) -> None:
    ws.send(blocks(dialect, gzip.compress(bytes(64 << 20)), 0))


def malformed(ws: ServerConnection, base: str, dialect: str) -> None:
    ws.send('{"blocks": [1, 2')


def deep(ws: ServerConnection, base: str, dialect: str) -> None:
    ws.send('{"blocks": ' + "[" * 200_000 + "]" * 200_000 + "}")


def not_bytes(ws: ServerConnection, base: str, dialect: str) -> None:
    batch = {"num_blocks": 1, "media_type": msg.TAR_GZIP, "encoding": "raw"}
    ws.send(msg.encode({"blocks": {**batch, "payload": [31, 139, 256]}}))


def elsewhere(tmp: Path) -> Scenario:
    """A real chain whose data file is to be downloaded from another host."""
    ds = source_dataset(tmp / "published", 1)
    chain = [(h, ds.get_block_bytes(h)) for h, _ in ds.iter_blocks()]

    def play(ws: ServerConnection, base: str, dialect: str) -> None:
        speaking = codec(Dialect(dialect))
        ws.send(msg.encode(speaking.metadata(chain, Phase.PULL_METADATA)))
        asked = speaking.read_object_files(json.loads(ws.recv(timeout=10)), "test", 10)
        strategies = [
            Strategy(f, TransferUrl(f"http://169.254.169.254/latest/{f.physical_hash}"))
            for f in asked
        ]
        ws.send(msg.encode(speaking.strategies(strategies, Phase.PULL_OBJECTS)))
        ws.recv(timeout=10)

    return play


DIALECTS = pytest.mark.parametrize("dialect", ["spec", "reference"])


@pytest.mark.parametrize(
    ("scenario", "refusal"),
    [
        pytest.param(
            oversized,
            "/hostile/pull: the server sent a message larger than 1048576 bytes (refused from its"
            " header)",
            id="oversized-message",
        ),
        pytest.param(
            inflating,
            "the metadata batch inflates past 4194304 bytes (refused while unpacking it)",
            id="gzip-bomb",
        ),
        pytest.param(
            zeros, "the batch has data after its tar archive", id="zeros-after-the-archive"
        ),
        pytest.param(malformed, "not a JSON message", id="malformed-json"),
        pytest.param(
            deep,
            "not a JSON message: nested deeper than 512 arrays and objects",
            id="deeply-nested-json",
        ),
    ],
)
@DIALECTS
def test_a_hostile_smart_server_is_refused_and_nothing_is_left(
    tmp_path: Path, scenario: Scenario, refusal: str, dialect: str
) -> None:
    ws = Workspace.init(tmp_path / "ws")
    with hostile_smart_server(scenario, dialect) as url, pytest.raises(OdfError) as e:
        Sharing(ws).pull_remote(url, Options(limits=LIMITS, dialect=dialect))
    assert refusal in str(e.value) and "\n" not in str(e.value)
    assert ws.list_datasets() == []
    assert not any(ws.datasets_dir.iterdir())


@DIALECTS
def test_download_urls_leaving_the_servers_origin_are_refused(tmp_path: Path, dialect: str) -> None:
    ws = Workspace.init(tmp_path / "ws")
    scenario = elsewhere(tmp_path)
    with hostile_smart_server(scenario, dialect) as url, pytest.raises(OdfError) as e:
        Sharing(ws).pull_remote(url, Options(limits=LIMITS, dialect=dialect))
    assert "download URL 'http://169.254.169.254/latest/" in str(e.value), str(e.value)
    assert "leaves the server's origin http://127.0.0.1:" in str(e.value)
    assert "(allow it with --allow-origin http://169.254.169.254:80)" in str(e.value)
    assert ws.list_datasets() == [] and not any(ws.datasets_dir.iterdir())


def test_a_reference_batch_whose_payload_is_not_bytes_is_refused(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "ws")
    with hostile_smart_server(not_bytes, "reference") as url, pytest.raises(OdfError) as e:
        Sharing(ws).pull_remote(url, Options(limits=LIMITS, dialect="reference"))
    assert "the batch's payload is not an array of bytes" in str(e.value)
    assert ws.list_datasets() == []


def test_an_auto_client_carries_on_in_the_spec_dialect_when_answered_in_it(
    tmp_path: Path,
) -> None:
    """``auto`` opens in the reference's dialect; a server answering in the spec's (an older
    ``odf serve``) is followed in it: here to the spec-form strategies, whose URL is refused."""
    ws = Workspace.init(tmp_path / "ws")
    with hostile_smart_server(elsewhere(tmp_path), "spec") as url, pytest.raises(OdfError) as e:
        Sharing(ws).pull_remote(url, Options(limits=LIMITS))
    assert "leaves the server's origin" in str(e.value), str(e.value)
