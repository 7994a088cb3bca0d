"""Two processes committing to one dataset at the same time.

With retries every batch of both ends up committed exactly once; without, the loser reports
a conflict and its batch is absent. Either way the chain stays valid.

The conflict itself is produced deterministically: two writers prepare from the same head and
are held (``commit_driver commit --hold``) until the test lets one commit, then the other.
The free-running pair of loops checks the same invariants under a real race, in which
conflicts may or may not happen.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from coordinator.dataset import Dataset
from tests.integration.coordinator.checks import check_consistent, check_no_leftovers
from tests.integration.coordinator.commit_driver import CONFLICT_EXIT
from tests.unit.coordinator.events import seed, set_schema

pytestmark = pytest.mark.process  # starts processes: out of `make test-fast`

ROOT = Path(__file__).resolve().parents[3]
DRIVER = [sys.executable, "-m", "tests.integration.coordinator.commit_driver"]
BATCHES = 15


@pytest.fixture
def ds(tmp_path: Path) -> Dataset:
    dataset = Dataset(tmp_path / "ds")
    dataset.commit_events([seed(), set_schema()], expected_head=None)
    return dataset


def run_writers(ds: Dataset, barrier: Path, *extra: str) -> list[tuple[int, list[str]]]:
    procs = [
        subprocess.Popen(
            [
                *DRIVER,
                "loop",
                str(ds.layout.root),
                "--first-batch",
                str(first),
                "--batches",
                str(BATCHES),
                "--barrier",
                str(barrier),
                *extra,
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for first in (1, 101)
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    barrier.touch()
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode in (0, CONFLICT_EXIT), err
        results.append((p.returncode, out.split("\n")))
    return results


def test_retrying_writers_commit_every_batch_exactly_once(ds: Dataset, tmp_path: Path) -> None:
    results = run_writers(ds, tmp_path / "go", "--retry")
    assert [code for code, _ in results] == [0, 0]
    batches = check_consistent(Dataset(ds.layout.root))
    expected = set(range(1, 1 + BATCHES)) | set(range(101, 101 + BATCHES))
    assert batches == dict.fromkeys(expected, 3)
    check_no_leftovers(ds)


def held_writer(ds: Dataset, batch: int, go: Path) -> subprocess.Popen[str]:
    """A writer that prepares ``batch`` from the current head, then waits for ``go``."""
    proc = subprocess.Popen(
        [*DRIVER, "commit", str(ds.layout.root), "--batch", str(batch), "--hold", str(go)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line == "prepared", proc.stderr.read() if proc.stderr else line
    return proc


def test_losing_writer_reports_a_conflict(ds: Dataset, tmp_path: Path) -> None:
    head = ds.head()
    winner = held_writer(ds, 1, tmp_path / "go-winner")
    loser = held_writer(ds, 101, tmp_path / "go-loser")
    assert ds.head() == head  # both prepared from this head, neither has committed

    (tmp_path / "go-winner").touch()
    out, err = winner.communicate(timeout=120)
    assert (winner.returncode, out) == (0, "committed 1\n"), err
    assert ds.head() != head

    (tmp_path / "go-loser").touch()
    out, err = loser.communicate(timeout=120)
    assert (loser.returncode, out) == (CONFLICT_EXIT, "conflict 101\n"), err

    assert check_consistent(Dataset(ds.layout.root)) == {1: 3}  # the loser's batch is absent
    check_no_leftovers(ds)


def test_racing_writers_without_retry_keep_exactly_what_they_report(
    ds: Dataset, tmp_path: Path
) -> None:
    """Free-running writers: whether or not one loses, the dataset holds exactly the batches
    reported committed, none reported as conflicts, and a valid chain."""
    results = run_writers(ds, tmp_path / "go")
    batches = check_consistent(Dataset(ds.layout.root))
    for _, lines in results:
        committed = {int(line.split()[1]) for line in lines if line.startswith("committed")}
        conflicts = {int(line.split()[1]) for line in lines if line.startswith("conflict")}
        assert committed <= set(batches)
        assert not conflicts & set(batches)
    assert set(batches) == {
        int(line.split()[1])
        for _, lines in results
        for line in lines
        if line.startswith("committed")
    }
    check_no_leftovers(ds)
