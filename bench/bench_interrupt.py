"""Seconds from Ctrl-C (SIGINT) to exit for ``odf sql`` running an endless query.

Creates a scratch workspace, then repeats: start ``odf -v sql -c <endless query>`` with the
embedded engine, wait until the engine is ready and the query has run for a moment, send
SIGINT, time the exit. The baseline, measured in the same run, is ``odf --help``: the cost
of starting and stopping the coordinator's interpreter at all. Target: exit within 2 s.

    .venv/bin/python bench/bench_interrupt.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENDLESS = "SELECT count(*) AS n FROM range(0, 1000000000000000)"
TARGET_S = 2.0


def odf(ws: Path, *args: str, **kwargs: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "coordinator", *args]
    return subprocess.Popen(command, cwd=ws, env=env, text=True, **kwargs)  # type: ignore[call-overload, no-any-return]


def interrupt_once(ws: Path) -> float:
    process = odf(ws, "-v", "sql", "-c", ENDLESS, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ready = threading.Event()

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            if "engine.ready" in line:
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    if not ready.wait(300):
        process.kill()
        raise SystemExit("the engine did not become ready")
    time.sleep(2.0)
    sent = time.perf_counter()
    process.send_signal(signal.SIGINT)
    code = process.wait(120)
    took = time.perf_counter() - sent
    if code != 130:
        raise SystemExit(f"odf sql exited {code}, expected 130")
    return took


def baseline_once(ws: Path) -> float:
    started = time.perf_counter()
    process = odf(ws, "--help", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    process.wait(60)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-interrupt-") as tmp:
        ws = Path(tmp)
        if odf(ws, "init", stdout=subprocess.DEVNULL).wait(60) != 0:
            raise SystemExit("odf init failed")
        baseline = [baseline_once(ws) for _ in range(args.repeats)]
        interrupt = [interrupt_once(ws) for _ in range(args.repeats)]
    runs = ", ".join(f"{t:.2f}" for t in interrupt)
    print(f"odf --help (interpreter start and exit): median {statistics.median(baseline):.2f} s")
    print(f"odf sql, SIGINT to exit: median {statistics.median(interrupt):.2f} s [{runs}]")
    print(f"target: {TARGET_S:.0f} s; worst run {max(interrupt):.2f} s")
    return 0 if max(interrupt) <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
