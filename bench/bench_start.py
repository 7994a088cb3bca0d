"""A one-shot ``odf sql`` with the embedded engine: today's start-up against the old one, and
start-up options measured one by one.

Every variant runs the same command in the same workspace (a root dataset of 1,000 records),
as a user would: ``odf sql -c 'SELECT ...'`` with no daemon, so the command starts its own
embedded engine, waits until it serves, runs the query and stops it. Variants alternate, so
load from other jobs falls on all of them alike. Each variant has its own cache directory
(``XDG_CACHE_HOME``), where one untimed run beforehand leaves the engine's class-data sharing
archive, as a user's first command does:

- ``warm-up`` (the old behaviour, the baseline): the engine runs a warm-up transaction
  before it serves (``ODF_ENGINE_WARM_UP=on``), no archive (``ODF_ENGINE_CDS=off``), its
  modules imported before the JVM is launched (``ODF_ENGINE_JVM_FIRST=off``), Spark stopped
  and the interpreter torn down before it exits (``ODF_ENGINE_FAST_STOP=off``);
- ``former default``: the same without the warm-up (one-shot commands skip it);
- then each start-up cut added to the one before: ``+ CDS archive`` (the application
  class-data sharing archive), ``+ JVM first`` (the engine's modules imported while the JVM
  boots), ``+ fast stop`` (the engine process exits as soon as the server stopped, the JVM
  stops Spark itself), ``default`` (what ``odf sql`` does now: also C1 only,
  ``-XX:TieredStopAtLevel=1``, for its one-shot engine, ``ODF_ENGINE_JIT=full`` turns it off);
- then the default plus a JVM option (``JAVA_TOOL_OPTIONS``, given to every JVM of the
  engine; its archive is its own, as the options are part of the archive's key): the serial
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
INHERITED_NOT = (
    "ODF_ENGINE_WARM_UP",
    "ODF_ENGINE_CDS",
    "ODF_ENGINE_JVM_FIRST",
    "ODF_ENGINE_FAST_STOP",
    "ODF_ENGINE_JIT",
    "JAVA_TOOL_OPTIONS",
    "XDG_CACHE_HOME",
)
QUERY = "SELECT count(*) AS n, max(population) AS top FROM small"


def variants() -> dict[str, dict[str, str]]:
    cuts = ("ODF_ENGINE_CDS", "ODF_ENGINE_JVM_FIRST", "ODF_ENGINE_FAST_STOP")
    full_jit = {"ODF_ENGINE_JIT": "full"}
    former = {**dict.fromkeys(cuts, "off"), **full_jit}
    return {
        "warm-up": {"ODF_ENGINE_WARM_UP": "on", **former},
        "former default": former,
        "+ CDS archive": {**dict.fromkeys(cuts[1:], "off"), **full_jit},
        "+ JVM first": {**dict.fromkeys(cuts[2:], "off"), **full_jit},
        "+ fast stop": full_jit,
        "default": {},
        "+ serial GC": {"JAVA_TOOL_OPTIONS": "-XX:+UseSerialGC"},
    }


def odf_sql(workspace: Path, extra_env: dict[str, str]) -> float:
    env = {
        **{k: v for k, v in os.environ.items() if k not in INHERITED_NOT},
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
        envs = {
            name: {**env, "XDG_CACHE_HOME": str(Path(tmp) / f"cache-{i}")}
            for i, (name, env) in enumerate(variants().items())
        }
        for env in envs.values():
            odf_sql(ws.root, env)  # the first start on a machine: writes the archive
        runs: dict[str, list[float]] = {name: [] for name in envs}
        for _ in range(args.repeats):
            for name, env in envs.items():
                runs[name].append(odf_sql(ws.root, env))
    base = statistics.median(runs["warm-up"])
    print(f"{'one-shot odf sql':<22} {'median':>8} {'ratio':>7}   runs (s)")
    for name, times in runs.items():
        median = statistics.median(times)
        shown = " ".join(f"{t:.2f}" for t in times)
        print(f"{name:<22} {median:>8.2f} {median / base:>6.0%}   {shown}")
    ratio = statistics.median(runs["default"]) / base
    ok = ratio <= TARGET
    default = statistics.median(runs["default"])
    write_json(args.json, [Figure("one-shot odf sql vs with warm-up", default, "s", base, TARGET)])
    print(f"default vs warm-up: {ratio:.0%} (target <= {TARGET:.0%}): {'OK' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
