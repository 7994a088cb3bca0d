"""Exactly-once transformations: a transaction interrupted anywhere leaves no trace.

- The engine is killed (SIGKILL) while it runs a transaction: ``odf pull`` fails with an
  engine error and the dataset is unchanged.
- The coordinator is killed (SIGKILL) after the engine answered and the output was hashed,
  right before the commit: the dataset is unchanged, and the embedded engine dies with it.

After each the dataset's head is where it was, and the next ``odf pull`` completes the
transaction exactly once: the records of an uninterrupted run, offsets without gap or
duplicate, one ExecuteTransform. (One scenario, to start the slow engine as few times as
possible.)

Run as ``python -m tests.e2e.test_transform_faults ARGS...`` this module is the CLI with a
fault injected: it kills itself right before the commit of the first transaction.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration.transform.pipeline import (
    check_derivative_chain,
    execute_transforms,
    records,
    write_round,
    write_snapshots,
)
from tests.support.cli import REPO, odf, start_odf

pytestmark = pytest.mark.e2e

SYSTEM_TIME = "2030-01-01T00:00:00Z"
BIG_CITIES = ["Kyiv", "Tokyo"]
ENGINE_PID = re.compile(r"engine\.started\s.*pid=(\d+)")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """``cities`` with one round of data; ``big-cities`` derived from it, not pulled yet."""
    ws = tmp_path / "ws"
    ws.mkdir()
    snapshots = write_snapshots(tmp_path / "snapshots")
    for name in ("city-density", "big-cities-x10", "areas"):
        (snapshots / f"{name}.yaml").unlink()
    for args in (
        ("init",),
        ("add", "--recursive", str(snapshots)),
        ("ingest", "cities", str(write_round(tmp_path / "data", 0)["cities"])),
    ):
        assert odf(ws, *args).returncode == 0
    return ws


def head_of(ws: Path, name: str) -> str:
    from coordinator.workspace import Workspace

    return str(Workspace(ws).open_dataset(name).head())


def check_exactly_once(ws: Path) -> None:
    from coordinator.workspace import Workspace

    workspace = Workspace(ws)
    big, cities = workspace.open_dataset("big-cities"), workspace.open_dataset("cities")
    assert len(execute_transforms(big)) == 1
    table = records(big)
    assert table.column("city").to_pylist() == BIG_CITIES
    assert table.column("offset").to_pylist() == [0, 1]
    check_derivative_chain(big, [cities])


def wait_gone(pid: int, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


def kill_engine_mid_transaction(ws: Path) -> None:
    """``odf pull`` whose embedded engine gets SIGKILL while it runs the transaction."""
    pull = start_odf(ws, "-v", "pull", "big-cities")
    assert pull.stderr is not None
    engine_pid = None
    for line in pull.stderr:
        found = ENGINE_PID.search(line)
        if found:
            engine_pid = int(found.group(1))
        if "transform.engine_call" in line:
            break
    assert engine_pid is not None, "the pull never called the engine"
    os.kill(engine_pid, signal.SIGKILL)  # a first transaction takes seconds: it is running
    _, err = pull.communicate(timeout=300)
    assert pull.returncode == 1
    assert "error: ExecuteTransform failed: embedded engine" in err


def kill_coordinator_before_commit(ws: Path) -> None:
    """``odf pull`` (this module's CLI) killed after the engine answered, before the commit."""
    killed = subprocess.run(
        [sys.executable, "-m", "tests.e2e.test_transform_faults", "-v", "pull", "big-cities"],
        cwd=ws,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert "transform.output_hashed" in killed.stderr  # it got that far, and no further
    found = ENGINE_PID.search(killed.stderr)
    assert found is not None
    assert wait_gone(int(found.group(1))), "the embedded engine outlived its coordinator"


def test_interrupted_transactions_leave_no_trace_and_complete_exactly_once(
    workspace: Path,
) -> None:
    before = head_of(workspace, "big-cities")
    kill_engine_mid_transaction(workspace)
    assert head_of(workspace, "big-cities") == before
    kill_coordinator_before_commit(workspace)
    assert head_of(workspace, "big-cities") == before

    again = odf(workspace, "pull", "big-cities", "--system-time", SYSTEM_TIME)
    assert again.returncode == 0, again.stderr
    assert "big-cities: 2 records (offsets 0..1) from 3 input records" in again.stdout
    check_exactly_once(workspace)
    assert "big-cities: up to date" in odf(workspace, "pull", "big-cities").stdout


# --- the fault-injecting CLI ----------------------------------------------------------------------


def _kill_before_commit(original: Callable[..., Any]) -> Callable[..., Any]:
    """``commit_items`` that dies right after building the events (nothing committed yet)."""
    import structlog

    def commit_items(*args: Any, **kwargs: Any) -> Any:
        items = original(*args, **kwargs)
        structlog.get_logger("fault").info("transform.output_hashed")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
        return items

    return commit_items


if __name__ == "__main__":
    from coordinator.cli import main
    from coordinator.transform import output  # the transaction imports it after the engine call

    output.commit_items = _kill_before_commit(output.commit_items)  # type: ignore[assignment]
    sys.exit(main(sys.argv[1:]))
