"""Faults with real ``odf ingest`` processes: SIGKILL during the commit, concurrent ingests.

After every fault the dataset must replay through the chain rules, hold each ingested file
wholly or not at all (never twice), with offsets 0..n-1, and take the next ingest.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from common.odf.events import AddData, AddPushSource
from common.odf.fragments import DatasetKind, MergeStrategyAppend, ReadStepCsv
from common.odf.snapshot import DatasetSnapshot
from coordinator.dataset import Dataset
from coordinator.dataset.replay import replay_chain
from coordinator.workspace import Workspace

pytestmark = pytest.mark.e2e

ROWS = 30_000
ODF = [sys.executable, "-m", "coordinator"]
SOURCE = AddPushSource(
    source_name="src",
    read=ReadStepCsv(schema=("batch STRING", "n BIGINT")),
    merge=MergeStrategyAppend(),
)


def setup(tmp_path: Path) -> tuple[Path, Dataset]:
    ws = Workspace.init(tmp_path)
    snapshot = DatasetSnapshot(name="faults", kind=DatasetKind.ROOT, metadata=(SOURCE,))
    return tmp_path, ws.create_dataset(snapshot)


def batch_file(tmp_path: Path, name: str, rows: int = ROWS) -> Path:
    path = tmp_path / f"{name}.csv"
    with open(path, "w") as f:
        f.writelines(f"{name},{i}\n" for i in range(rows))
    return path


def ingest(ws: Path, file: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*ODF, "ingest", "faults", str(file)],
        cwd=ws,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
    )


def batches_present(ds: Dataset) -> Counter[str]:
    """Checks the dataset's invariants; returns the records per ingested file."""
    state = replay_chain(ds.chain)
    counts: Counter[str] = Counter()
    offsets: list[int] = []
    for _, block in ds.iter_blocks():
        event = block.event
        if isinstance(event, AddData) and event.new_data is not None:
            table = pq.read_table(ds.data_path(event.new_data.physical_hash))
            offsets += table.column("offset").to_pylist()
            counts.update(table.column("batch").to_pylist())
    assert sorted(offsets) == list(range(state.next_offset))
    assert all(n == ROWS for n in counts.values()), f"partial or doubled files: {counts}"
    return counts


def holds_commit_lock(ds: Dataset) -> bool:
    try:
        fd = os.open(ds.layout.commit_lock_path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def kill_during_commit(proc: subprocess.Popen[str], ds: Dataset) -> bool:
    """SIGKILL ``proc`` as soon as it holds the commit lock; False if it finished first."""
    while proc.poll() is None:
        if holds_commit_lock(ds):
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.0002)  # leave the CPU to the ingest on small machines
    return False


def test_sigkill_during_commit_leaves_old_or_new_head(tmp_path: Path) -> None:
    ws, ds = setup(tmp_path)
    expected: set[str] = set()
    killed_in_commit = 0
    for attempt in range(3):
        name = f"b{attempt}"
        head = ds.head()
        proc = ingest(ws, batch_file(tmp_path, name))
        if kill_during_commit(proc, ds):
            killed_in_commit += 1
        else:
            assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
        present = batches_present(ds)
        if name in present:
            expected.add(name)
        else:
            assert ds.head() == head
        assert set(present) == expected
    assert killed_in_commit >= 2
    proc = ingest(ws, batch_file(tmp_path, "after"))
    assert proc.wait() == 0
    assert set(batches_present(ds)) == expected | {"after"}
    referenced = {
        ds.data_path(b.event.new_data.physical_hash).name
        for _, b in ds.iter_blocks()
        if isinstance(b.event, AddData) and b.event.new_data is not None
    }
    assert {p.name for p in ds.layout.data_dir.iterdir()} == referenced  # no orphans left


def test_sigkill_at_random_times(tmp_path: Path) -> None:
    ws, ds = setup(tmp_path)
    expected: set[str] = set()
    for attempt, delay in enumerate((0.5, 1.5, 3.0)):
        name = f"r{attempt}"
        proc = ingest(ws, batch_file(tmp_path, name))
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        present = batches_present(ds)
        expected |= {name} & set(present)
        assert set(present) == expected
    assert ingest(ws, batch_file(tmp_path, "after")).wait() == 0
    assert set(batches_present(ds)) == expected | {"after"}


def test_concurrent_ingests_commit_exactly_once_or_report_a_conflict(tmp_path: Path) -> None:
    ws, ds = setup(tmp_path)
    committed: set[str] = set()
    for round_ in range(2):
        names = [f"c{round_}a", f"c{round_}b"]
        procs = [ingest(ws, batch_file(tmp_path, n, rows=10_000)) for n in names]
        for name, proc in zip(names, procs, strict=True):
            _, err = proc.communicate()
            if proc.returncode == 0:
                committed.add(name)
            else:
                assert err.count("\n") == 1 and err.startswith("error: ")
                assert "modified concurrently" in err
        counts = Counter(
            b
            for _, block in ds.iter_blocks()
            if isinstance(block.event, AddData) and block.event.new_data is not None
            for b in set(
                pq.read_table(ds.data_path(block.event.new_data.physical_hash))
                .column("batch")
                .to_pylist()
            )
        )
        assert set(counts) == committed
        assert all(n == 1 for n in counts.values())
    replay_chain(ds.chain)
    assert len(committed) >= 2
