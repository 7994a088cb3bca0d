"""A one-shot ``odf sql`` with the embedded engine: today's start-up against the old one, and JVM
start-up options measured one by one.

Every variant runs the same command in the same workspace (a root dataset of 1,000 records),
as a user would: ``odf sql -c 'SELECT ...'`` with no daemon, so the command starts its own
embedded engine, waits until it serves, runs the query and stops it. Variants alternate, so
load from other jobs falls on all of them alike:

- ``warm-up`` (the old behaviour, the baseline): the engine runs a warm-up transaction
  before it serves (``ODF_ENGINE_WARM_UP=on``);
- ``default``: what ``odf`` does now (no warm-up for one-shot commands);
- then the default plus one JVM option each (``JAVA_TOOL_OPTIONS``, given to every JVM of the
  engine): an application class-data sharing archive (made beforehand by one run with
  ``-XX:ArchiveClassesAtExit``, not timed), C1 only (``-XX:TieredStopAtLevel=1``), the serial
  garbage collector.

Target: ``default`` at most 60% of ``warm-up`` (medians). Exits 1 when missed.
``--json PATH`` also writes the figures for ``bench/run_all.py``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_transform import create_root

from bench.figures import Figure, add_json_argument, write_json
from coordinator.workspace import Workspace

TARGET = 0.60
QUERY = "SELECT count(*) AS n, max(population) AS top FROM small"


def variants(archive: Path) -> dict[str, dict[str, str]]:
    return {
        "warm-up": {"ODF_ENGINE_WARM_UP": "on"},
        "default": {},
        "+ app CDS archive": {"JAVA_TOOL_OPTIONS": f"-XX:SharedArchiveFile={archive}"},
        "+ C1 only": {"JAVA_TOOL_OPTIONS": "-XX:TieredStopAtLevel=1"},
        "+ serial GC": {"JAVA_TOOL_OPTIONS": "-XX:+UseSerialGC"},
    }


def odf_sql(workspace: Path, extra_env: dict[str, str]) -> float:
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("ODF_ENGINE_WARM_UP",)},
        "ODF_NO_DAEMON": "1",
        **extra_env,
    }
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "coordinator", "sql", "--command", QUERY],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0 or "1000" not in done.stdout:
        raise SystemExit(f"odf sql failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    add_json_argument(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-start-") as tmp:
        ws = Workspace.init(Path(tmp) / "ws")
        create_root(ws, "small", 1000, Path(tmp))
        archive = Path(tmp) / "engine.jsa"
        odf_sql(ws.root, {"JAVA_TOOL_OPTIONS": f"-XX:ArchiveClassesAtExit={archive}"})
        runs: dict[str, list[float]] = {name: [] for name in variants(archive)}
        for _ in range(args.repeats):
            for name, env in variants(archive).items():
                runs[name].append(odf_sql(ws.root, env))
    base = statistics.median(runs["warm-up"])
    print(f"{'one-shot odf sql':<20} {'median':>8} {'ratio':>7}   runs (s)")
    for name, times in runs.items():
        median = statistics.median(times)
        shown = " ".join(f"{t:.2f}" for t in times)
        print(f"{name:<20} {median:>8.2f} {median / base:>6.0%}   {shown}")
    ratio = statistics.median(runs["default"]) / base
    ok = ratio <= TARGET
    default = statistics.median(runs["default"])
    write_json(args.json, [Figure("one-shot odf sql vs with warm-up", default, "s", base, TARGET)])
    print(f"default vs warm-up: {ratio:.0%} (target <= {TARGET:.0%}): {'OK' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
