"""Every benchmark of issue 15, each in its own process, and ONE table of their figures.

Runs (in this order, each as ``python bench/bench_X.py ... --json FILE``, its own output shown
as it goes): CLI start (``--version``, ``list``, ``log`` against ``python -c pass``), ingest
against bare pyarrow (library and CLI, 2M rows; with ``--big GB`` also the peak RSS on a
file of that size, minutes: an explicit flag), block encoding and appends at 100, 10,000 and
100,000 blocks, a whole transaction against DataFusion (100k, 1M, 5M records), the
coordinator's overhead around a 1M-record transaction (in process and through ``odf pull``),
a one-shot ``odf sql`` against the former start with a warm-up, the engine's idle and peak
memory, the daemon under a soak, the web UI's page times (200 datasets, 5,000 blocks).
Then prints one table: figure, ours, baseline, ratio, target, OK/MISSED; each ratio
a one-shot ``odf sql`` against the former start with a warm-up, the phases of a warm
100k-record transaction and raw query against plain PySpark, the engine's idle and peak
memory. Then prints one table: figure, ours, baseline, ratio, target, OK/MISSED; each ratio
is against a baseline measured in the same run. Exits 1 when any target is missed or a
benchmark fails (the whole table is printed first).

    .venv/bin/python bench/run_all.py [--only NAME ...] [--quick] [--big GB] [--load N]

``--load N``: a loaded run: N processes spinning on the CPU (a 2-core machine with N = 2 runs
everything at about half speed) for as long as the benchmarks run, so "quiet" and "loaded"
are the same command with one flag apart; the table's title says which it was.

``--quick``: small sizes and single runs, to check that everything runs (smoke test), not to
judge the targets: it exits 1 only when a benchmark produced no figures. ``--only``: a
subset, by name (``cli_start``, ``ingest``, ...).
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent))

from bench.figures import Figure, read_json  # noqa: E402


@dataclass(frozen=True)
class Bench:
    name: str
    script: str
    quick: tuple[str, ...] = ()
    """Arguments of a smoke run: small sizes, one repetition."""


BENCHES = (
    Bench("cli_start", "bench_cli_start.py", ("--runs", "3")),
    Bench("ingest", "bench_ingest.py", ("--rows", "200000", "--repeat", "1", "--scale", "1")),
    Bench(
        "blocks",
        "bench_blocks.py",
        ("--seconds", "0.3", "--appends", "5", "--lengths", "100", "1000"),
    ),
    Bench("datafusion", "bench_datafusion.py", ("--sizes", "100000", "--repeats", "1")),
    Bench("transform", "bench_transform.py", ("--rows", "100000", "--repeats", "1")),
    Bench("phases", "bench_phases.py", ("--rows", "20000", "--repeats", "1", "--no-daemon")),
    Bench("daemon_query", "bench_daemon_query.py", ("--rows", "20000", "--repeats", "1")),
    Bench("start", "bench_start.py", ("--repeats", "1")),
    Bench("memory", "bench_memory.py", ("--rows", "1000000")),
    Bench("soak", "bench_soak.py", ("--seconds", "20")),
    Bench("flight_sql", "bench_flight_sql.py", ("--rows", "1000000", "--runs", "3")),
    Bench("ui", "bench_ui.py", ("--datasets", "20", "--blocks", "500", "--repeats", "3")),
)


@dataclass(frozen=True)
class BenchResult:
    name: str
    exit_code: int
    figures: tuple[Figure, ...]
    seconds: float = 0.0


# --- the table (pure) ----------------------------------------------------------------------------

HEADER = ("figure", "ours", "baseline", "ratio", "target", "")


def table_rows(results: list[BenchResult]) -> tuple[list[tuple[str, ...]], bool]:
    """The table's rows (without the header) and whether every target is met and every
    benchmark succeeded. A benchmark that failed, or exited non-zero although each of its
    figures is met (a check outside the table), gets a MISSED row of its own."""
    rows: list[tuple[str, ...]] = []
    ok = True
    for result in results:
        for f in result.figures:
            status = "" if f.ok is None else "OK" if f.ok else "MISSED"
            ok &= f.ok is not False
            rows.append(
                (
                    f.name,
                    show(f.ours, f.unit),
                    "" if f.baseline is None else show(f.baseline, f.unit),
                    "" if f.ratio is None else f"{f.ratio:.2f}x",
                    target_text(f),
                    status,
                )
            )
        if result.exit_code != 0 and all(f.ok is not False for f in result.figures):
            ok = False
            why = "failed" if not result.figures else "a check outside the table failed"
            rows.append(
                (f"{result.name}: {why} (exit code {result.exit_code})", *[""] * 4, "MISSED")
            )
    return rows, ok


def render(rows: list[tuple[str, ...]]) -> str:
    """Aligned columns (text left, figures right), two spaces apart."""
    everything = [HEADER, *rows]
    widths = [max(len(r[i]) for r in everything) for i in range(len(HEADER))]
    lines = []
    for r in everything:
        cells = [
            r[i].ljust(widths[i]) if i in (0, 5) else r[i].rjust(widths[i]) for i in range(len(r))
        ]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines) + "\n"


def show(value: float, unit: str) -> str:
    """``value`` in ``unit`` as a person reads it."""
    if math.isinf(value) or math.isnan(value):
        return str(value)
    if unit == "s":
        return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"
    if unit == "B":
        return f"{value / 2**20:,.0f} MiB"
    if unit == "share":
        return f"{value:.1%}"
    if unit == "bool":
        return "yes" if value else "no"
    if unit == "rows/s":
        return f"{value / 1e6:.2f} M rows/s"
    if unit.endswith("/s"):
        return f"{value:,.0f} {unit}"
    return f"{value:g} {unit}"


def target_text(f: Figure) -> str:
    if f.target is None:
        return ""
    bound = ">=" if f.at_least else "<="
    if f.baseline is not None:
        return f"{bound} {f.target:g}x"
    if f.unit == "bool":
        return "yes" if f.at_least else "no"
    return f"{bound} {show(f.target, f.unit)}"


# --- running --------------------------------------------------------------------------------------


def run(bench: Bench, extra: list[str], work: Path) -> BenchResult:
    out = work / f"{bench.name}.json"
    argv = [sys.executable, str(BENCH_DIR / bench.script), *extra, "--json", str(out)]
    print(f"== {bench.script} {' '.join(extra)}", flush=True)
    started = time.perf_counter()
    code = subprocess.run(argv, check=False).returncode
    seconds = time.perf_counter() - started
    figures: tuple[Figure, ...] = ()
    if out.is_file():
        try:
            figures = tuple(read_json(out))
        except (ValueError, KeyError, TypeError) as e:
            print(f"{bench.script}: unreadable figures: {e}", file=sys.stderr)
            code = code or 1
    print(f"== {bench.script}: exit code {code} after {seconds:.0f} s", flush=True)
    return BenchResult(bench.name, code, figures, seconds)


SPIN = "while True: pass"


@contextmanager
def background_load(processes: int) -> Iterator[None]:
    """``processes`` CPU spinners for the duration (none for 0), stopped however it ends."""
    spinners = [
        subprocess.Popen([sys.executable, "-c", SPIN], stdin=subprocess.DEVNULL)
        for _ in range(processes)
    ]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait()


def run_mode(quick: bool, load: int) -> str:
    """What the table's title says about the run."""
    modes = []
    if quick:
        modes.append("quick: sizes too small to judge the targets")
    if load:
        modes.append(f"loaded: {load} CPU spinners beside it on {os.cpu_count()} cores")
    return f" ({'; '.join(modes)})" if modes else " (quiet: nothing added beside it)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = [b.name for b in BENCHES]
    parser.add_argument("--only", nargs="+", choices=names, metavar="NAME", help=", ".join(names))
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test")
    parser.add_argument(
        "--big", type=float, metavar="GB", help="ingest's peak RSS on a CSV this large too"
    )
    parser.add_argument(
        "--load", type=int, default=0, metavar="N", help="N CPU spinners beside the run"
    )
    args = parser.parse_args()
    if args.load < 0:
        parser.error("--load: the number of spinners cannot be negative")
    chosen = [b for b in BENCHES if not args.only or b.name in args.only]
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-all-") as tmp, background_load(args.load):
        for bench in chosen:
            extra = list(bench.quick) if args.quick else []
            if bench.name == "ingest" and args.big:
                extra += ["--big", str(args.big)]
            results.append(run(bench, extra, Path(tmp)))
    rows, ok = table_rows(results)
    mode = run_mode(args.quick, args.load)
    print(f"\nissue 15 benchmarks, each ratio against a baseline of the same run{mode}")
    print(render(rows), end="")
    print("all targets met" if ok else "MISSED: a target above is not met or a benchmark failed")
    if args.quick:  # a smoke test: fails only when a benchmark did not run through
        return 1 if any(not r.figures for r in results) else 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
