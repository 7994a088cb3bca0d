"""Staging and temporary directories: symbolic links are never followed, and leftovers of
killed commands (only those) are removed by the next run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from common.odf.fragments import DatasetKind
from common.odf.snapshot import DatasetSnapshot
from coordinator.dataset import staging
from coordinator.tempdirs import (
    LOCK_NAME,
    UnsafePathError,
    clean_dead,
    owned_temp_dir,
    remove_tree,
    require_real_dir,
)
from coordinator.workspace import Workspace

ROOT = Path(__file__).resolve().parents[3]
OLD = time.time() - 7200


def victim(tmp_path: Path) -> Path:
    """A directory outside the workspace with old content that no lock protects."""
    target = tmp_path / "victim"
    (target / "sub").mkdir(parents=True)
    (target / "sub" / "precious").write_text("keep")
    (target / "file").write_text("keep")
    os.utime(target / "sub", (OLD, OLD))
    return target


def intact(target: Path) -> bool:
    return (target / "sub" / "precious").read_text() == "keep" and (target / "file").exists()


def dataset_root(tmp_path: Path) -> Workspace:
    ws = Workspace.init(tmp_path / "ws")
    ws.create_dataset(DatasetSnapshot(name="ds", kind=DatasetKind.ROOT, metadata=()))
    return ws


def test_require_real_dir(tmp_path: Path) -> None:
    assert not require_real_dir(tmp_path / "new")
    assert require_real_dir(tmp_path / "new", create=True)
    assert (tmp_path / "new").is_dir()
    (tmp_path / "link").symlink_to(tmp_path / "new")
    with pytest.raises(UnsafePathError, match="link: is a symbolic link; refusing"):
        require_real_dir(tmp_path / "link", create=True)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(UnsafePathError):
        require_real_dir(tmp_path / "dangling", create=True)
    assert not (tmp_path / "nowhere").exists()
    (tmp_path / "file").write_text("")
    with pytest.raises(UnsafePathError, match="is not a directory"):
        require_real_dir(tmp_path / "file")


@pytest.mark.parametrize("linked", [".coordinator/staging", ".coordinator"])
def test_a_symlinked_staging_area_is_refused_and_its_target_untouched(
    tmp_path: Path, linked: str
) -> None:
    ds = dataset_root(tmp_path).open_dataset("ds")
    target = victim(tmp_path)
    link = ds.layout.root / linked
    remove_tree(link)
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(target)
    head = ds.head()
    with pytest.raises(UnsafePathError, match=f"{linked}: is a symbolic link"):
        ds.staging_dir().__enter__()
    with pytest.raises(UnsafePathError):
        ds.clean_leftovers()
    assert intact(target)
    assert sorted(p.name for p in target.iterdir()) == ["file", "sub"]
    assert ds.head() == head


def test_links_inside_the_staging_area_are_unlinked_not_followed(tmp_path: Path) -> None:
    ds = dataset_root(tmp_path).open_dataset("ds")
    target = victim(tmp_path)
    ds.layout.staging_root.mkdir(parents=True, exist_ok=True)
    link = ds.layout.staging_root / "123-abc"
    link.symlink_to(target)
    os.utime(link, (OLD, OLD), follow_symlinks=False)
    assert staging.clean_stale(ds.layout) == [link]
    assert not link.is_symlink()
    assert intact(target)


def test_workspace_leftovers_that_are_links_are_unlinked_not_followed(tmp_path: Path) -> None:
    ws = dataset_root(tmp_path)
    target = victim(tmp_path)
    (ws.datasets_dir / ".deleting-x").symlink_to(target)
    ws.clean_leftovers()
    assert not (ws.datasets_dir / ".deleting-x").is_symlink()
    assert intact(target)


def test_a_live_owner_keeps_its_directory_whatever_its_age(tmp_path: Path) -> None:
    with owned_temp_dir("odf-t-", tmp_path) as live:
        os.utime(live, (OLD, OLD))
        assert clean_dead("odf-t-", tmp_path) == []
        assert live.is_dir()
    assert not live.exists()


@pytest.mark.process  # starts a process: out of `make test-fast`
def test_leftovers_of_killed_processes_are_removed_by_the_next_run(tmp_path: Path) -> None:
    code = (
        "import time\nfrom pathlib import Path\nfrom coordinator.tempdirs import owned_temp_dir\n"
        f"with owned_temp_dir('odf-t-', Path({str(tmp_path)!r})) as d:\n"
        "    print(d, flush=True); time.sleep(600)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert child.stdout is not None
    left = Path(child.stdout.readline().strip())
    (left / "engine.sock").write_text("")
    os.utime(left, (OLD, OLD))
    assert clean_dead("odf-t-", tmp_path) == []  # its owner is alive
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert left.is_dir()  # SIGKILL: nothing cleaned up
    assert clean_dead("odf-t-", tmp_path) == [left]
    assert not left.exists()


def test_what_is_not_a_dead_owners_directory_is_never_removed(tmp_path: Path) -> None:
    target = victim(tmp_path)
    (tmp_path / "odf-t-link").symlink_to(target)
    (tmp_path / "odf-t-file").write_text("")
    young = tmp_path / "odf-t-young"  # may not hold its lock yet
    young.mkdir()
    (young / LOCK_NAME).write_text("")
    unlocked = tmp_path / "odf-t-old-version"  # made by a version without locks
    unlocked.mkdir()
    os.utime(unlocked, (time.time() - 3600, time.time() - 3600))
    odd_lock = tmp_path / "odf-t-odd-lock"
    odd_lock.mkdir()
    (odd_lock / LOCK_NAME).symlink_to(target / "file")
    os.utime(odd_lock, (OLD, OLD))
    assert clean_dead("odf-t-", tmp_path) == []
    assert intact(target)
    assert young.is_dir() and unlocked.is_dir() and odd_lock.is_dir()
    os.utime(unlocked, (OLD - 86400, OLD - 86400))
    assert clean_dead("odf-t-", tmp_path) == [unlocked]


def test_each_new_directory_cleans_the_dead_ones_first(tmp_path: Path) -> None:
    dead = tmp_path / "odf-t-dead"
    dead.mkdir()
    (dead / LOCK_NAME).write_text("12345\n")  # nobody holds it
    os.utime(dead, (OLD, OLD))
    with owned_temp_dir("odf-t-", tmp_path) as d:
        assert (d / LOCK_NAME).read_text() == f"{os.getpid()}\n"
        assert not dead.exists()
