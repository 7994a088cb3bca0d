"""``odf push`` / ``odf pull`` between workspaces, as real processes, over ``file://`` and a
real ``python -m http.server``; remote content that was tampered with is refused and the
local side stays exactly as it was; a pull killed with ``kill -9`` is completed by the next.
"""

from __future__ import annotations

import hashlib
import http.server
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from common.odf.events import AddData
from common.odf.multihash import Multihash
from coordinator.dataset import Dataset
from tests.support.cli import fails, ok, start_odf
from tests.support.datasets import root

pytestmark = pytest.mark.e2e

COLUMNS = ["date TIMESTAMP NOT NULL", "city STRING", "population BIGINT"]
CITIES = root("cities", COLUMNS, read="NdJson", event_time="date")


def workspace(path: Path) -> Path:
    path.mkdir(parents=True)
    ok(path, "init")
    return path


def publisher(path: Path) -> Path:
    """A workspace with the root dataset ``cities`` and one ingested file."""
    ws = workspace(path)
    (ws / "cities.yaml").write_text(CITIES)
    ok(ws, "add", "cities.yaml")
    ingest(ws, 1)
    return ws


def ingest(ws: Path, day: int) -> None:
    f = ws / f"day{day}.json"
    f.write_text(
        f'{{"date": "2020-01-{day:02d}T00:00:00Z", "city": "c{day}", "population": {day}}}\n'
    )
    ok(ws, "ingest", "cities", str(f))


def moved(out: str) -> tuple[int, int]:
    """(blocks, objects) a push or pull line reports."""
    m = re.search(r"(\d+) blocks, (\d+) objects", out)
    assert m, out
    return int(m.group(1)), int(m.group(2))


def snapshot(ds: Path) -> dict[str, str]:
    """Every public file of a dataset directory and the hash of its content."""
    files = {}
    for sub in ("blocks", "data", "checkpoints", "refs"):
        for p in sorted((ds / sub).glob("*")) if (ds / sub).is_dir() else []:
            files[f"{sub}/{p.name}"] = hashlib.sha256(p.read_bytes()).hexdigest()
    return files


def head(ds: Path) -> str:
    return (ds / "refs" / "head").read_text()


def new_objects(old: Path, new: Path, kind: str) -> list[Path]:
    """Files of ``new/<kind>`` that ``old`` lacks."""
    return sorted(p for p in (new / kind).iterdir() if not (old / kind / p.name).exists())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def versions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A dataset published twice: ``v1`` (one ingest) and ``v2`` (one more), each a copy of
    the repository; ``other`` is a repository with another dataset."""
    base = tmp_path_factory.mktemp("published")
    a = publisher(base / "a")
    ok(a, "push", "cities", "--to", f"file://{base}/repo/cities")
    shutil.copytree(base / "repo", base / "v1")
    ingest(a, 2)
    ok(a, "push", "cities")
    shutil.copytree(base / "repo", base / "v2")
    other = publisher(base / "o")
    ok(other, "push", "cities", "--to", f"file://{base}/other/cities")
    return {"v1": base / "v1" / "cities", "v2": base / "v2" / "cities", "other": base / "other"}


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[tuple[Path, str, Path]]:
    """A real ``python -m http.server`` on a directory: (directory, base URL, its log)."""
    root_dir = tmp_path / "served"
    root_dir.mkdir()
    port = free_port()
    log = tmp_path / "http.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
            cwd=root_dir,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "http.server did not start"
                time.sleep(0.05)
        yield root_dir, f"http://127.0.0.1:{port}", log
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# --- the round trip ------------------------------------------------------------------------


def test_push_clone_verify_update_over_file(tmp_path: Path) -> None:
    a = publisher(tmp_path / "a")
    b = workspace(tmp_path / "b")
    repo = tmp_path / "repo"
    ok(a, "repo", "add", "shared", f"file://{repo}")
    out = ok(a, "push", "cities", "--to", "shared/cities")
    assert moved(out) == (5, 1)
    ok(b, "repo", "add", "shared", f"file://{repo}")
    out = ok(b, "pull", "shared/cities")
    assert "cities: cloned from" in out and moved(out) == (5, 1)
    assert "cities: ok" in ok(b, "verify", "cities")

    ingest(a, 2)
    out = ok(a, "push", "cities")  # the remembered target
    assert moved(out) == (1, 1)
    out = ok(b, "pull", "cities")  # the remembered source: only what is new moves
    assert "pulled from" in out and moved(out) == (1, 1)
    assert head(b / ".odf/datasets/cities") == head(a / ".odf/datasets/cities")
    assert "up to date" in ok(b, "pull", "--all")
    assert "cities: ok" in ok(b, "verify", "cities")
    assert snapshot(b / ".odf/datasets/cities") == snapshot(repo / "cities")
    # the same dataset under another name: refused once its Seed is read, before any object
    error = fails(b, "pull", "shared/cities", "--as", "copy", only_line=True)
    assert error == (
        f"error: shared/cities: dataset 'cities' is already this dataset"
        f" ({Dataset(b / '.odf/datasets/cities').state().id.to_did()}): update it with"  # type: ignore[union-attr]
        " `odf pull cities`; nothing downloaded"
    )
    assert not (b / ".odf/datasets/copy").exists()


def test_clone_and_update_over_http(
    tmp_path: Path, http_server: tuple[Path, str, Path], versions: dict[str, Path]
) -> None:
    served, url, log = http_server
    shutil.copytree(versions["v1"], served / "cities")
    b = workspace(tmp_path / "b")
    out = ok(b, "pull", f"{url}/cities", "--as", "mirror")
    assert "mirror: cloned from" in out and moved(out) == (5, 1)
    assert "mirror: ok" in ok(b, "verify", "mirror")

    shutil.rmtree(served / "cities")
    shutil.copytree(versions["v2"], served / "cities")
    before = log.read_text().count("GET /cities/data/")
    out = ok(b, "pull", "--all")
    assert "mirror: pulled from" in out and moved(out) == (1, 1)
    assert log.read_text().count("GET /cities/data/") - before == 1  # counted by the server
    assert head(b / ".odf/datasets/mirror") == head(versions["v2"])
    assert "mirror: ok" in ok(b, "verify", "mirror")
    fails(b, "push", "mirror", "--to", f"{url}/x")  # http is read-only


# --- tampering -----------------------------------------------------------------------------


def flip_byte(p: Path) -> None:
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF
    p.write_bytes(bytes(data))


def _tamper(case: str, v1: Path, remote: Path, other: Path) -> None:
    data = new_objects(v1, remote, "data")[0]
    block = remote / "blocks" / head(remote)
    match case:
        case "data byte flipped":
            flip_byte(data)
        case "block edited":
            flip_byte(block)
        case "block of another dataset":
            block.write_bytes((other / "blocks" / head(other)).read_bytes())
        case "missing data file":
            data.unlink()
        case "larger data file":
            data.write_bytes(data.read_bytes() + b"x")
        case "truncated data file":
            data.write_bytes(data.read_bytes()[:-1])
        case "ref to a foreign chain":
            for p in (other / "blocks").iterdir():
                shutil.copy(p, remote / "blocks" / p.name)
            (remote / "refs" / "head").write_text(head(other))
        case "data file is a link":
            target = remote.parent / "secret"
            target.write_bytes(data.read_bytes())
            data.unlink()
            data.symlink_to(target)


TAMPERING = {
    "data byte flipped": "has physical hash .*: its content was changed",
    "block edited": "hash to .*: the block was changed",
    "block of another dataset": "hash to .*: the block was changed",
    "missing data file": r"data/f1620\w+ \(named by block f1620\w+\) is missing",
    "larger data file": "is larger than the \\d+ bytes its block names",
    "truncated data file": "has \\d+ bytes, its block names \\d+",
    "ref to a foreign chain": "is the head of another dataset's chain",
    "data file is a link": "is a symbolic link",
}


@pytest.fixture(scope="module")
def clone_of_v1(tmp_path_factory: pytest.TempPathFactory, versions: dict[str, Path]) -> Path:
    """A workspace that cloned ``v1`` (tests copy it)."""
    b = workspace(tmp_path_factory.mktemp("clone") / "b")
    ok(b, "pull", f"file://{versions['v1']}")
    return b


@pytest.mark.parametrize("case", list(TAMPERING))
def test_tampered_update_is_refused_and_changes_nothing(
    tmp_path: Path, versions: dict[str, Path], clone_of_v1: Path, case: str
) -> None:
    remote = tmp_path / "remote" / "cities"
    shutil.copytree(versions["v2"], remote)
    _tamper(case, versions["v1"], remote, versions["other"] / "cities")
    b = tmp_path / "b"
    shutil.copytree(clone_of_v1, b, symlinks=True)
    local = b / ".odf/datasets/cities"
    before = snapshot(local)
    error = fails(b, "pull", f"file://{remote}")
    assert re.search(TAMPERING[case], error), error
    assert snapshot(local) == before


@pytest.mark.parametrize("case", ["data byte flipped", "block edited", "missing data file"])
def test_tampered_clone_leaves_no_dataset(
    tmp_path: Path, versions: dict[str, Path], case: str
) -> None:
    remote = tmp_path / "remote" / "cities"
    shutil.copytree(versions["v2"], remote)
    _tamper(case, versions["v1"], remote, versions["other"] / "cities")
    b = workspace(tmp_path / "b")
    error = fails(b, "pull", f"file://{remote}")
    assert re.search(TAMPERING[case], error), error
    assert list((b / ".odf/datasets").iterdir()) == []


def test_objects_over_the_size_limit_are_refused(tmp_path: Path, versions: dict[str, Path]) -> None:
    b = workspace(tmp_path / "b")
    error = fails(b, "pull", f"file://{versions['v2']}", "--max-object-size", "100")
    assert re.search(r"has \d+ bytes, over the limit of 100", error), error
    assert list((b / ".odf/datasets").iterdir()) == []


@pytest.mark.parametrize(
    ("ref", "why"),
    [
        ("file:///no/such/dir/cities", "no dataset there"),
        ("nope/cities", "no repository named 'nope'"),
        ("ftp://h/cities", "unsupported scheme 'ftp'"),
        ("file:///srv/../cities", "path segment '..' is not allowed"),
        ("http://127.0.0.1:9/x/cities", "http://127.0.0.1:9/x/cities/refs/head"),
        ("file:///srv/x_y", "its last segment is not a dataset name; give one with --as NAME"),
    ],
)
def test_bad_references_are_refused(tmp_path: Path, ref: str, why: str) -> None:
    b = workspace(tmp_path / "b")
    assert why in fails(b, "pull", ref, only_line=True)


# --- divergence and compare-and-swap ----------------------------------------------------------


def test_divergence_is_refused_naming_both_heads_and_push_is_a_compare_and_swap(
    tmp_path: Path, versions: dict[str, Path]
) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(versions["v2"], repo / "cities")
    b = workspace(tmp_path / "b")
    ok(b, "pull", f"file://{versions['v1']}")
    ingest(b, 9)  # B writes its own block on top of v1: the chains diverge
    local = b / ".odf/datasets/cities"
    error = fails(b, "pull", f"file://{repo}/cities")
    common = head(versions["v1"])
    assert f"local head {head(local)}, remote head {head(repo / 'cities')}" in error
    assert f"last common block {common}" in error

    target = f"file://{repo}/cities"
    error = fails(b, "push", "cities", "--to", target)
    assert "diverged" in error and f"last common block {common}" in error
    assert head(repo / "cities") == head(versions["v2"])
    out = ok(b, "push", "cities", "--to", target, "--force")
    assert moved(out) == (1, 1)
    assert head(repo / "cities") == head(local)

    c = workspace(tmp_path / "c")
    ok(c, "pull", f"file://{repo}/cities")
    assert "cities: ok" in ok(c, "verify", "cities")
    # a publisher still at v2 may not overwrite what B pushed: its target moved
    a = workspace(tmp_path / "a")
    ok(a, "pull", f"file://{versions['v2']}")
    error = fails(a, "push", "cities", "--to", target)
    assert "diverged" in error
    # and a target that is ahead is refused too
    behind = workspace(tmp_path / "d")
    ok(behind, "pull", f"file://{versions['v1']}")
    shutil.rmtree(repo / "cities")
    shutil.copytree(versions["v2"], repo / "cities")
    assert "is ahead of dataset 'cities'" in fails(behind, "push", "cities", "--to", target)
    assert "is behind" in ok(c, "pull", f"file://{versions['v1']}", "--as", "cities")


# --- kill -9 in the middle --------------------------------------------------------------------


class _Stalling(http.server.SimpleHTTPRequestHandler):
    """Serves a directory; a request for a path containing ``stall`` waits for ``release``."""

    stall = ""
    arrived = threading.Event()
    release = threading.Event()

    def do_GET(self) -> None:
        if self.stall and self.stall in self.path:
            type(self).arrived.set()
            type(self).release.wait(60)
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_pull_killed_in_the_middle_is_completed_by_the_next(tmp_path: Path) -> None:
    served = tmp_path / "served"
    a = publisher(tmp_path / "a")
    ok(a, "push", "cities", "--to", f"file://{served}/cities")
    b = workspace(tmp_path / "b")
    ok(b, "pull", f"file://{served}/cities")
    for day in (2, 3, 4):
        ingest(a, day)
    ok(a, "push", "cities")  # three data files ahead of B's clone
    local = b / ".odf/datasets/cities"
    # the newest block's data file: with one download at a time, the two before it are
    # received and stored when the pull is killed waiting for it
    newest = Dataset(served / "cities").get_block(Multihash.from_multibase(head(served / "cities")))
    assert isinstance(newest.event, AddData) and newest.event.new_data is not None
    stalled = newest.event.new_data.physical_hash.to_multibase()

    handler = type("Handler", (_Stalling,), {"stall": stalled})
    handler.arrived = threading.Event()
    handler.release = threading.Event()
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), partial(handler, directory=str(served))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/cities"
        before = snapshot(local)
        proc = start_odf(b, "pull", url, "--as", "cities", "--parallel", "1")
        try:
            assert handler.arrived.wait(60), "the pull never asked for the stalled file"
            time.sleep(0.3)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        finally:
            proc.stdout.close() if proc.stdout else None
            proc.stderr.close() if proc.stderr else None
        # the head and the blocks are as they were; two received data files wait for the next
        assert len(new_objects(served / "cities", local, "data")) == 0
        data_before = [k for k in before if k.startswith("data/")]
        assert len(list((local / "data").iterdir())) == len(data_before) + 2
        assert {k: v for k, v in snapshot(local).items() if not k.startswith("data/")} == {
            k: v for k, v in before.items() if not k.startswith("data/")
        }
        handler.release.set()
        out = ok(b, "pull", "cities")
        assert "pulled from" in out and moved(out) == (3, 1)  # resumed: one object left
        assert head(local) == head(served / "cities")
        assert "cities: ok" in ok(b, "verify", "cities")
    finally:
        handler.release.set()
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    "case", ["larger data file", "data byte flipped", "missing data file", "block edited"]
)
def test_tampered_content_over_http_is_refused(
    tmp_path: Path,
    http_server: tuple[Path, str, Path],
    versions: dict[str, Path],
    clone_of_v1: Path,
    case: str,
) -> None:
    served, url, _ = http_server
    shutil.copytree(versions["v2"], served / "cities")
    _tamper(case, versions["v1"], served / "cities", versions["other"] / "cities")
    b = tmp_path / "b"
    shutil.copytree(clone_of_v1, b, symlinks=True)
    local = b / ".odf/datasets/cities"
    before = snapshot(local)
    error = fails(b, "pull", f"{url}/cities", "--as", "cities")
    assert re.search(TAMPERING[case], error), error
    assert snapshot(local) == before


# --- a daemon serves its datasets --------------------------------------------------------------


def test_pull_from_a_running_daemon(tmp_path: Path) -> None:
    import urllib.error
    import urllib.request

    from tests.support.daemon import serving

    a = publisher(tmp_path / "a")
    b = workspace(tmp_path / "b")
    with serving(a) as served:
        url = f"http://{served.info['httpAddress']}"
        out = ok(b, "pull", f"{url}/cities")
        assert moved(out) == (5, 1)
        ingest(a, 2)  # through the daemon
        out = ok(b, "pull", "cities")
        assert moved(out) == (1, 1)
        assert head(b / ".odf/datasets/cities") == head(a / ".odf/datasets/cities")
        for path in ("/cities/../../.odf/keys", "/cities/refs/../../x", "/nope/refs/head"):
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(f"{url}{path}", timeout=10)
            assert e.value.code == 404, path
    assert "cities: ok" in ok(b, "verify", "cities")


def test_smart_pull_from_a_running_daemon(tmp_path: Path) -> None:
    from tests.support.daemon import serving

    a = publisher(tmp_path / "a")
    b = workspace(tmp_path / "b")
    with serving(a) as served:
        url = f"odf+http://{served.info['httpAddress']}/cities"
        out = ok(b, "pull", url)
        assert "cities: cloned from" in out and moved(out) == (5, 1)
        ingest(a, 2)
        out = ok(b, "pull", "cities")
        assert moved(out) == (1, 1)
        assert head(b / ".odf/datasets/cities") == head(a / ".odf/datasets/cities")
        assert "no dataset" in fails(b, "pull", f"odf+http://{served.info['httpAddress']}/nope")
    assert "cities: ok" in ok(b, "verify", "cities")
