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
from coordinator.sharing.transfer import Options
from coordinator.workspace import Workspace
from tests.support.hostile_smart_server import Scenario, hostile_smart_server
from tests.unit.sharing.test_transfer import source_dataset

LIMITS = Limits(max_message_bytes=1 << 20, max_block_bytes=2 << 20, max_batch_bytes=4 << 20)


def oversized(ws: ServerConnection, base: str) -> None:
    ws.send("x" * (2 << 20))


def inflating(ws: ServerConnection, base: str) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for i in range(64):
            info = tarfile.TarInfo(Multihash.sha3_256(bytes([i])).to_multibase())
            info.size = 1 << 20
            tar.addfile(info, io.BytesIO(bytes(1 << 20)))
    payload = base64.b64encode(gzip.compress(buffer.getvalue())).decode()
    ws.send(
        msg.encode({"blocks": {**msg.blocks_batch([]), "objectsCount": 64, "payload": payload}})
    )


def zeros(ws: ServerConnection, base: str) -> None:
    payload = base64.b64encode(gzip.compress(bytes(64 << 20))).decode()
    ws.send(msg.encode({"blocks": {**msg.blocks_batch([]), "payload": payload}}))


def malformed(ws: ServerConnection, base: str) -> None:
    ws.send('{"blocks": [1, 2')


def deep(ws: ServerConnection, base: str) -> None:
    ws.send('{"blocks": ' + "[" * 200_000 + "]" * 200_000 + "}")


def elsewhere(tmp: Path) -> Scenario:
    """A real chain whose data file is to be downloaded from another host."""
    ds = source_dataset(tmp / "published", 1)
    blocks = [(h, ds.get_block_bytes(h)) for h, _ in ds.iter_blocks()]

    def play(ws: ServerConnection, base: str) -> None:
        ws.send(msg.encode({"blocks": msg.blocks_batch(blocks)}))
        asked = json.loads(ws.recv(timeout=10))
        strategies = [
            {
                "objectFile": f,
                "pullStrategy": "HttpDownload",
                "downloadFrom": {"url": f"http://169.254.169.254/latest/{f['physicalHash']}"},
            }
            for f in asked["objectFiles"]
        ]
        ws.send(msg.encode({"objectTransferStrategies": strategies}))
        ws.recv(timeout=10)

    return play


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
def test_a_hostile_smart_server_is_refused_and_nothing_is_left(
    tmp_path: Path, scenario: Scenario, refusal: str
) -> None:
    ws = Workspace.init(tmp_path / "ws")
    with hostile_smart_server(scenario) as url, pytest.raises(OdfError) as e:
        Sharing(ws).pull_remote(url, Options(limits=LIMITS))
    assert refusal in str(e.value) and "\n" not in str(e.value)
    assert ws.list_datasets() == []
    assert not any(ws.datasets_dir.iterdir())


def test_download_urls_leaving_the_servers_origin_are_refused(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "ws")
    with hostile_smart_server(elsewhere(tmp_path)) as url, pytest.raises(OdfError) as e:
        Sharing(ws).pull_remote(url, Options(limits=LIMITS))
    assert "download URL 'http://169.254.169.254/latest/" in str(e.value)
    assert "leaves the server's origin http://127.0.0.1:" in str(e.value)
    assert "(allow it with --allow-origin http://169.254.169.254:80)" in str(e.value)
    assert ws.list_datasets() == [] and not any(ws.datasets_dir.iterdir())
