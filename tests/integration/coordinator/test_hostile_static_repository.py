"""``odf pull http://`` against a hostile static repository (a real HTTP server on loopback):
endless, oversized, forged and looping answers are refused in one line, and nothing is left in
the workspace."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from common.odf.errors import OdfError
from common.odf.multihash import Multihash
from coordinator.app.sharing import Sharing
from coordinator.sharing.limits import Limits
from coordinator.sharing.transfer import Options
from coordinator.workspace import Workspace
from tests.support.http_serving import serving

Answer = Callable[[BaseHTTPRequestHandler], None]
FORGED = Multihash.sha3_256(b"a block that is not there").to_multibase()


@contextmanager
def hostile_repository(answer: Answer) -> Iterator[str]:
    """Serve ``answer`` to every GET; yields the URL of a dataset there."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            with contextlib.suppress(OSError):  # the client hung up: expected
                answer(self)

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as port:
        yield f"http://127.0.0.1:{port}/ds"


def endless_head(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.end_headers()
    for _ in range(100_000):  # 6 GB, if anyone read it
        h.wfile.write(b"f" * 65536)


def head_then_huge_block(h: BaseHTTPRequestHandler) -> None:
    body = FORGED.encode() if h.path.endswith("/refs/head") else b"\0" * (4 << 20)
    h.send_response(200)
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


def head_then_forged_block(h: BaseHTTPRequestHandler) -> None:
    body = FORGED.encode() if h.path.endswith("/refs/head") else b"not the block it names"
    h.send_response(200)
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


def dripping_head(h: BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("Content-Length", "1000")
    h.end_headers()
    for _ in range(1000):  # a byte every 0.1 s: each read is well within its timeout
        h.wfile.write(b"f")
        h.wfile.flush()
        time.sleep(0.1)


def redirect_loop(h: BaseHTTPRequestHandler) -> None:
    h.send_response(302)
    h.send_header("Location", h.path)
    h.send_header("Content-Length", "0")
    h.end_headers()


def redirect_to_a_file(h: BaseHTTPRequestHandler) -> None:
    h.send_response(302)
    h.send_header("Location", "file:///etc/passwd")
    h.send_header("Content-Length", "0")
    h.end_headers()


@pytest.mark.parametrize(
    ("answer", "refusal"),
    [
        pytest.param(endless_head, "refs/head", id="endless-head"),
        pytest.param(head_then_huge_block, "larger than", id="oversized-block"),
        pytest.param(head_then_forged_block, FORGED, id="forged-block"),
        pytest.param(redirect_loop, "redirects", id="redirect-loop"),
        pytest.param(
            dripping_head,
            "fewer than 1024 bytes in 1 s: a stalled or dripping server, cut off",
            id="dripping",
        ),
        pytest.param(redirect_to_a_file, "ds/refs/head", id="redirect-to-a-file"),
    ],
)
def test_a_hostile_static_repository_is_refused_and_nothing_is_left(
    tmp_path: Path, answer: Answer, refusal: str
) -> None:
    ws = Workspace.init(tmp_path / "ws")
    limits = Limits(max_block_bytes=1 << 20, stall_seconds=1.0, stall_bytes=1024)
    with hostile_repository(answer) as url, pytest.raises(OdfError) as e:
        Sharing(ws).pull_remote(url, Options(limits=limits))
    assert refusal in str(e.value), str(e.value)
    assert "\n" not in str(e.value)
    assert ws.list_datasets() == [] and not any(ws.datasets_dir.iterdir())
