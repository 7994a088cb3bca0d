"""``common.processes.pid_alive``: running, zombie and reaped processes."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from common.processes import pid_alive

pytestmark = pytest.mark.process


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_running_process_is_alive_a_zombie_and_a_reaped_one_are_not() -> None:
    assert pid_alive(os.getpid())
    assert pid_alive(1)  # another user's process (or ours, as root) still counts
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert pid_alive(child.pid)
    finally:
        child.kill()
    deadline = time.monotonic() + 10
    while _state(child.pid) != "Z":  # exited, not yet reaped: a zombie
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.01)
    assert not pid_alive(child.pid)
    child.wait()
    assert not pid_alive(child.pid)
