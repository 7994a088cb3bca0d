"""CLI start: ``odf --version``, ``odf list`` and ``odf log`` against a bare ``python -c pass``.

Workload: a workspace with three root datasets (a Seed, a SetInfo and a SetDataSchema each);
each command is run as a fresh process (``python -m coordinator ...``, the checkout first on
the path, as the tests run it), ``--runs`` times each, in turns with the baseline so that
both see the same load (hyperfine-like: wall time, medians; the CPU time of each process is
shown too, less sensitive to the machine's load). The baseline is the same interpreter running
``-c pass``: the floor of any Python command. Bytecode caches are written and used as an
installed package has them (``PYTHONDONTWRITEBYTECODE`` is dropped for the runs): otherwise
every run compiles the coordinator's sources, which no user's run does.

Target: every command's median at most 3x the baseline's. Exits 1 when one is missed.
``--tree PATH`` times another checkout's CLI (e.g. the main branch, for a before figure).

Run: ``.venv/bin/python bench/bench_cli_start.py [--runs N] [--tree PATH] [--json PATH]``
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.figures import Figure, add_json_argument, write_json
from common.odf.fragments import DatasetKind
from common.odf.snapshot import DatasetSnapshot
from common.serde.arrow_schema import encode_arrow_schema
from coordinator.workspace import Workspace

REPO = Path(__file__).resolve().parents[1]
TARGET_RATIO = 3.0
DATASETS = ("cities", "population", "weather")


def make_workspace(root: Path) -> None:
    import pyarrow as pa

    from common.odf.events import SetDataSchema, SetInfo

    ws = Workspace.init(root)
    schema = pa.schema([("event_time", pa.timestamp("ms", tz="UTC")), ("city", pa.string())])
    for name in DATASETS:
        ws.create_dataset(
            DatasetSnapshot(
                name=name,
                kind=DatasetKind.ROOT,
                metadata=(
                    SetInfo(description=f"the {name} of the world"),
                    SetDataSchema(schema=encode_arrow_schema(schema)),
                ),
            )
        )


def run_once(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """The wall time and the CPU time (user + system) of one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each command")
    parser.add_argument("--tree", type=Path, default=REPO, help="the checkout whose CLI to time")
    add_json_argument(parser)
    args = parser.parse_args()

    env = {**os.environ, "PYTHONPATH": str(args.tree.resolve()), "ODF_NO_DAEMON": "1"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    python = sys.executable
    commands = {
        "python -c pass (baseline)": [python, "-c", "pass"],
        "odf --version": [python, "-m", "coordinator", "--version"],
        "odf list": [python, "-m", "coordinator", "list"],
        f"odf log {DATASETS[0]}": [python, "-m", "coordinator", "log", DATASETS[0]],
    }
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        cwd = Path(tmp)
        make_workspace(cwd)
        for argv in commands.values():  # warm the file cache and the bytecode caches
            run_once(argv, cwd, env)
        times: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, argv in commands.items():
                wall, used = run_once(argv, cwd, env)
                times[name].append(wall)
                cpu[name].append(used)

    medians = {name: statistics.median(ts) for name, ts in times.items()}
    cpu_medians = {name: statistics.median(ts) for name, ts in cpu.items()}
    base = "python -c pass (baseline)"
    baseline, cpu_baseline = medians[base], cpu_medians[base]
    print(f"CLI start of {args.tree}, medians of {args.runs} runs each, in turns")
    figures = []
    for name, median in medians.items():
        ratio = median / baseline
        used = cpu_medians[name]
        line = (
            f"{name:<28} {median * 1000:8.1f} ms   ratio to baseline {ratio:5.2f}"
            f"   (CPU {used * 1000:6.1f} ms, ratio {used / cpu_baseline:5.2f})"
        )
        if name != base:
            figure = Figure(f"CLI start: {name}", median, "s", baseline, TARGET_RATIO)
            figures.append(figure)
            line += f"   target <= {TARGET_RATIO}x: {'OK' if figure.ok else 'MISSED'}"
        print(line)
    write_json(args.json, figures)
    return 0 if all(f.ok for f in figures) else 1


if __name__ == "__main__":
    raise SystemExit(main())
