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


BASE = "python -c pass (baseline)"


def time_in_turns(
    runs: dict[str, tuple[list[str], dict[str, str]]], cwd: Path, turns: int
) -> tuple[dict[str, float], dict[str, float]]:
    """The median wall and CPU times of each named run (``argv``, ``env``), ``turns`` times
    each in turns (after one warm-up run each: file cache, bytecode caches)."""
    for argv, env in runs.values():
        run_once(argv, cwd, env)
    times: dict[str, list[float]] = {name: [] for name in runs}
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(turns):
        for name, (argv, env) in runs.items():
            wall, used = run_once(argv, cwd, env)
            times[name].append(wall)
            cpu[name].append(used)
    return (
        {name: statistics.median(ts) for name, ts in times.items()},
        {name: statistics.median(ts) for name, ts in cpu.items()},
    )


def timing_line(name: str, medians: dict[str, float], cpu: dict[str, float], width: int) -> str:
    """``name``'s wall and CPU medians, with their ratios to ``BASE``'s."""
    wall, used = medians[name], cpu[name]
    return (
        f"{name:<{width}} {wall * 1000:8.1f} ms   ratio to baseline {wall / medians[BASE]:5.2f}"
        f"   (CPU {used * 1000:6.1f} ms, ratio {used / cpu[BASE]:5.2f})"
    )


def print_timings(
    title: str,
    medians: dict[str, float],
    cpu: dict[str, float],
    width: int,
    targets: dict[str, tuple[Figure, str]],
) -> list[Figure]:
    """Print a ``timing_line`` for each run, with its figure's target (``targets``: the
    figure of a run and how its target reads) met or missed, under ``title``; the figures."""
    print(title)
    figures = []
    for name in medians:
        line = timing_line(name, medians, cpu, width)
        found = targets.get(name)
        if found is not None:
            figure, target = found
            figures.append(figure)
            line += f"   target {target}: {'OK' if figure.ok else 'MISSED'}"
        print(line)
    return figures


def cli_arguments(doc: str, what: str) -> argparse.Namespace:
    """The options of a CLI timing: ``--runs`` (of each ``what``), ``--tree`` (the checkout
    whose CLI runs) and ``--json``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help=f"runs of each {what}")
    parser.add_argument("--tree", type=Path, default=REPO, help="the checkout whose CLI to time")
    add_json_argument(parser)
    return parser.parse_args()


def cli_environment(tree: Path) -> dict[str, str]:
    """The environment of a timed CLI: ``tree`` on the path, no daemon, byte code cached."""
    env = {**os.environ, "PYTHONPATH": str(tree.resolve()), "ODF_NO_DAEMON": "1"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def main() -> int:
    args = cli_arguments(__doc__, "command")
    env = cli_environment(args.tree)
    python = sys.executable
    commands = {
        BASE: [python, "-c", "pass"],
        "odf --version": [python, "-m", "coordinator", "--version"],
        "odf list": [python, "-m", "coordinator", "list"],
        f"odf log {DATASETS[0]}": [python, "-m", "coordinator", "log", DATASETS[0]],
    }
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        cwd = Path(tmp)
        make_workspace(cwd)
        runs = {name: (argv, env) for name, argv in commands.items()}
        medians, cpu_medians = time_in_turns(runs, cwd, args.runs)

    title = f"CLI start of {args.tree}, medians of {args.runs} runs each, in turns"
    targets = {
        name: (
            Figure(f"CLI start: {name}", wall, "s", medians[BASE], TARGET_RATIO),
            f"<= {TARGET_RATIO}x",
        )
        for name, wall in medians.items()
        if name != BASE
    }
    figures = print_timings(title, medians, cpu_medians, 28, targets)
    write_json(args.json, figures)
    return 0 if all(f.ok for f in figures) else 1


if __name__ == "__main__":
    raise SystemExit(main())
