"""A committing process killed (SIGKILL) at every step of a commit, and at random moments.

After each kill the dataset must replay through every chain rule, its head must be the old
block or the new one, no record may be lost or duplicated, and the next commit must succeed
and clean up what the dead one left behind.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coordinator.dataset import Dataset
from coordinator.dataset.staging import clean_stale
from tests.integration.coordinator.checks import check_consistent, check_no_leftovers
from tests.integration.coordinator.commit_driver import commit_batch
from tests.unit.coordinator.events import seed, set_schema

pytestmark = pytest.mark.process  # starts processes: out of `make test-fast`

ROOT = Path(__file__).resolve().parents[3]
DRIVER = [sys.executable, "-m", "tests.integration.coordinator.commit_driver"]


def driver(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*DRIVER, *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.fixture
def ds(tmp_path: Path) -> Dataset:
    dataset = Dataset(tmp_path / "ds")
    dataset.commit_events([seed(), set_schema()], expected_head=None)
    commit_batch(dataset, 0, 3)
    return dataset


def test_kill_at_every_step_of_a_commit(ds: Dataset) -> None:
    counted = driver("commit", str(ds.layout.root), "--batch", "1", "--count-ops")
    assert counted.returncode == 0, counted.stderr
    steps = int(counted.stdout)
    assert steps > 10
    outcomes = []
    for step in range(1, steps + 1):
        batch = 100 + step
        before = Dataset(ds.layout.root)
        old_head = before.head()
        killed = driver(
            "commit", str(ds.layout.root), "--batch", str(batch), "--kill-at", str(step)
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        after = Dataset(ds.layout.root)
        head = after.head()
        assert head is not None
        assert head == old_head or after.get_block(head).prev_block_hash == old_head
        batches = check_consistent(after)
        committed = batch in batches
        assert committed == (head != old_head)
        assert batches.get(batch, 3) == 3
        outcomes.append(committed)
        # The next writer succeeds and removes what the killed one left behind.
        commit_batch(after, 1000 + step, 2)
        check_no_leftovers(after)
        clean_stale(after.layout, min_age=0)  # the killed writer's staging directory
        assert not any(after.layout.staging_root.iterdir())
        assert check_consistent(after)[1000 + step] == 2
    # The sweep crossed the commit point: early kills lost the batch, late ones kept it.
    assert outcomes[0] is False and outcomes[-1] is True


def test_kill_at_random_moments(ds: Dataset) -> None:
    rng = random.Random(20240101)
    first = 1
    for _ in range(8):
        proc = subprocess.Popen(
            [*DRIVER, "loop", str(ds.layout.root), "--first-batch", str(first), "--batches", "50"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, 0.3))
        proc.send_signal(signal.SIGKILL)
        reported = {int(line.split()[1]) for line in proc.stdout if line.startswith("committed")}
        proc.wait()
        batches = check_consistent(Dataset(ds.layout.root))
        ours = {b for b in batches if first <= b < first + 50}
        # Everything reported committed is there; at most one more (killed after its commit
        # point, before it could say so).
        assert reported <= ours and len(ours - reported) <= 1
        first += 50
    survivor = Dataset(ds.layout.root)
    commit_batch(survivor, 9999, 1)
    check_no_leftovers(survivor)
