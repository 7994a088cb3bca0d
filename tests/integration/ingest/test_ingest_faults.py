"""Faults with real ``odf ingest`` processes: SIGKILL during the commit, concurrent ingests.

After every fault the dataset must replay through the chain rules, hold each ingested file
wholly or not at all (never twice), with offsets 0..n-1, and take the next ingest.

Where a test needs the process at a given point of its commit, it runs ``odf`` through
``odf_driver``, which stops the commit exactly there (``coordinator.dataset.commit.step_hook``)
until the test kills the process or lets it go on: no polling race with the writer.
"""

from __future__ import annotations

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
from coordinator.tempdirs import lock_held
from coordinator.workspace import Workspace

pytestmark = pytest.mark.e2e

ROWS = 30_000
ODF = [sys.executable, "-m", "coordinator"]
ODF_DRIVER = [sys.executable, "-m", "tests.integration.ingest.odf_driver"]
REPO = Path(__file__).resolve().parents[3]
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


def ingest(
    ws: Path,
    file: Path,
    *,
    steps: Path | None = None,
    stop_at: str | None = None,
    writer_locks: bool = True,
) -> subprocess.Popen[str]:
    """``odf ingest faults FILE``; with ``steps``, through ``odf_driver`` (see its docstring)."""
    odf = (
        ODF
        if steps is None
        else [
            *ODF_DRIVER,
            str(steps),
            *(["--stop-at", stop_at] if stop_at else []),
            *([] if writer_locks else ["--no-writer-locks"]),
            "--",
        ]
    )
    return subprocess.Popen(
        [*odf, "ingest", "faults", str(file)],
        cwd=ws,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def wait_until_stopped_at(proc: subprocess.Popen[str], steps: Path, step: str) -> None:
    """Wait until ``proc`` (started with ``stop_at=step``) waits at ``step`` of its commit."""
    deadline = time.monotonic() + 300  # a bound for failures only: the process waits there
    while not (steps / f"at-{step}").exists():
        if proc.poll() is not None:
            _, err = proc.communicate()
            raise AssertionError(f"odf ingest exited with {proc.returncode} first: {err}")
        assert time.monotonic() < deadline, f"odf ingest never reached {step}"
        time.sleep(0.05)


def steps_reached(steps: Path) -> list[str]:
    return (steps / "steps").read_text().split()


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
    return bool(lock_held(ds.layout.commit_lock_path))


KILL_POINTS = {"locked": False, "stored": False, "head_replaced": True}
"""Where in its commit an ingest is killed, and whether its file is committed by then."""


def test_sigkill_during_commit_leaves_old_or_new_head(tmp_path: Path) -> None:
    ws, ds = setup(tmp_path)
    expected: set[str] = set()
    for attempt, (step, committed) in enumerate(KILL_POINTS.items()):
        name = f"b{attempt}"
        head = ds.head()
        steps = tmp_path / f"steps-{name}"
        proc = ingest(ws, batch_file(tmp_path, name), steps=steps, stop_at=step)
        wait_until_stopped_at(proc, steps, step)
        assert holds_commit_lock(ds)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait() == -signal.SIGKILL
        present = batches_present(ds)
        if committed:
            expected.add(name)
            assert ds.head() != head
        else:
            assert ds.head() == head
        assert set(present) == expected
    assert expected == {"b2"}
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


def test_an_ingest_that_loses_the_race_retries_and_commits_once(tmp_path: Path) -> None:
    """Two ingests prepared from the same head (writers that take no writer lock: the writer
    locks make odf's own ingests take turns, tests/e2e/test_writers_cli.py): the second to
    commit hits the conflict, prepares again from the new head and commits; each file is in
    the dataset once. The compare-and-swap is the last guard."""
    ws, ds = setup(tmp_path)
    procs = {}
    for name in ("first", "second"):
        steps = tmp_path / f"steps-{name}"
        procs[name] = (
            ingest(
                ws, batch_file(tmp_path, name), steps=steps, stop_at="locking", writer_locks=False
            ),
            steps,
        )
        wait_until_stopped_at(procs[name][0], steps, "locking")
    head = ds.head()  # both prepared from it, neither has taken the lock
    for name in ("first", "second"):
        proc, steps = procs[name]
        (steps / "go").touch()
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    assert steps_reached(procs["first"][1]) == ["locking", "locked", "stored", "head_replaced"]
    assert steps_reached(procs["second"][1]) == [
        "locking",
        "locked",  # the head moved: a conflict, nothing written
        "locking",
        "locked",
        "stored",
        "head_replaced",
    ]
    assert ds.head() != head
    assert batches_present(ds) == {"first": ROWS, "second": ROWS}
