"""``odf verify`` on a standalone cluster: data files hashed by the executors or by the coordinator.

One standalone cluster (a Master and two single-core Workers, 512 MiB executors, from pip
pyspark's ``spark-class``: the test suite's ``tests/support/spark_cluster.py``), the embedded
engine as its driver with shared staging. The workspace is ``tests/e2e/test_split_cluster.py``'s
(``big-cities`` pulled as a split transaction of three blocks over ``cities``' three), plus a
root ``wide`` of ``--files`` ingested CSV files of ``--rows`` rows each.

Each verify runs twice, once per path, alternating which goes first:

- ``executors``: as merged (HashDataFiles: the executors hash the data files);
- ``coordinator``: the same command with ``hashes_on_executors`` answering no (the previous
  path: the coordinator reads and hashes every data file).

Reported: wall time of the ``odf`` process and its own CPU seconds (``getrusage`` of the
process itself at exit: the engine and the executors are other processes).

    .venv/bin/python bench/bench_verify_cluster.py [--rows 1000000] [--files 4] [--wide-only]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.e2e.test_split_cluster import SPLIT, build  # noqa: E402
from tests.support.cli import ok  # noqa: E402
from tests.support.datasets import root  # noqa: E402
from tests.support.spark_cluster import standalone_cluster  # noqa: E402
from tests.support.workspace import add  # noqa: E402

WRAPPER = """
import atexit, resource, runpy, sys
if sys.argv[1] == "coordinator":
    import coordinator.verify.engine_hashes as engine_hashes
    engine_hashes.hashes_on_executors = lambda master, kind: False
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    print(f"bench-cpu {r.ru_utime + r.ru_stime:.3f}", file=sys.stderr)
atexit.register(cpu)
sys.argv = ["odf", *sys.argv[2:]]
runpy.run_module("coordinator", run_name="__main__", alter_sys=True)
"""
PATHS = ("executors", "coordinator")


def run(ws: Path, env: dict[str, str], path: str, *args: str) -> tuple[float, float]:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", WRAPPER, path, *args],
        cwd=ws,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        check=False,
    )
    wall = time.monotonic() - started
    if result.returncode != 0:
        raise SystemExit(f"odf {' '.join(args)} ({path}) failed:\n{result.stdout}\n{result.stderr}")
    executors = "verify.hashed_by_engine" in result.stderr
    if executors != (path == "executors"):
        raise SystemExit(f"odf {' '.join(args)} ({path}): hashed on the wrong side")
    found = re.search(r"bench-cpu ([0-9.]+)", result.stderr)
    assert found is not None, result.stderr
    return wall, float(found.group(1))


def wide_csv(path: Path, rows: int, seed: int) -> None:
    with open(path, "w") as f:
        f.write("event_time,id,name,value\n")
        for i in range(rows):
            f.write(f"2024-01-01T00:00:00Z,{seed * rows + i},n{(i * 7919) % 100003},{i * 0.5}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--wide-only", action="store_true", help="verify wide only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-verify-") as tmp:
        base = Path(tmp)
        with standalone_cluster(base / "cluster") as cluster:
            ws = build(base / "ws")
            add(
                ws,
                root("wide", ["event_time TIMESTAMP", "id BIGINT", "name STRING", "value DOUBLE"]),
            )
            files = []
            for i in range(args.files):
                wide_csv(ws / f"wide{i}.csv", args.rows, i)
                files.append(f"wide{i}.csv")
            ok(ws, "ingest", "wide", *files)
            shared = base / "shared"
            shared.mkdir()
            (ws / ".odf" / "config.yaml").write_text(
                f"engine:\n  master: {cluster.master_url}\n  stagingDir: file://{shared}\n" + SPLIT
            )
            env = cluster.engine_env()
            ok(ws, "pull", "big-cities", env=env)
            data = ws / ".odf" / "datasets" / "wide" / "data"
            size = sum(f.stat().st_size for f in data.iterdir())
            print(f"wide: {args.files} files, {size / 1e6:.1f} MB of Parquet")
            print("| verify | path | wall s | odf CPU s |")
            print("|---|---|---|---|")
            commands = [("verify", "--recursive", "big-cities"), ("verify", "wide")]
            for command in commands[1:] if args.wide_only else commands:
                for r in range(args.repeat):
                    order = PATHS if r % 2 == 0 else PATHS[::-1]
                    for path in order:
                        wall, cpu = run(ws, env, path, "-v", *command)
                        print(f"| `odf {' '.join(command)}` | {path} | {wall:.1f} | {cpu:.2f} |")


if __name__ == "__main__":
    main()
