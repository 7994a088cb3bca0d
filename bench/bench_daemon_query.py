"""``odf sql --command 'SELECT count(*) ...'`` through a running daemon, this checkout's against
a baseline checkout's, alternating in one run (issue 32).

One workspace (a root ``a`` of ``--rows`` records) copied for each side; each side's daemon
(``odf serve`` of its checkout) serves its copy. Every ``odf sql`` is a real process, with
bytecode caches written and used as an installed package has them. Measured, medians of
``--repeats``, the sides in turns:

- **warm**: after each daemon's engine has started and answered twice, the whole command,
  the daemon's own ``Query`` call (its log's ``daemon.call``) and the rest (the client
  process: start, imports, the result's decoding and printing); beside them the floors of
  any client in the same turns: ``python -c pass`` and ``python -c 'import grpc'``;
- **after a restart**: both daemons started again; this checkout's replays the workspace's
  recent queries on its engine before any request (``coordinator/daemon/query_warm_up.py``;
  the bench waits for it), the baseline's engine is started by one other query (as a
  user's first query would); then the first ``--restart-queries`` counts of each,
  alternating.

Targets (exit 1 when missed): the warm count at most 0.25 s and at most 0.5x the baseline's.
Without ``--baseline`` only this checkout's figures, the absolute target only.

    .venv/bin/python bench/bench_daemon_query.py [--rows 100000] [--repeats 7]
        [--baseline DIR]   # e.g. git archive main | tar -x -C /tmp/base
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path.insert(0, str(REPO))

from bench.figures import Figure, add_json_argument, write_json  # noqa: E402

DAEMON_QUERY_TARGET_S = 0.25
DAEMON_QUERY_RATIO = 0.5
"""The daemon's small query at most this times the baseline daemon's."""
COUNT = "SELECT count(*) AS n FROM a"
WARM_UP_TIMEOUT_S = 300.0
GRPC_FLOOR = "python -c 'import grpc'"


def logged_seconds(path: Path, event: str, last: int, **match: str) -> list[float]:
    """The ``seconds`` of the last ``last`` JSON log lines of ``event`` in ``path`` (those
    whose fields equal ``match``): what the process itself measured of each call."""
    found = []
    for line in path.read_text(errors="replace").splitlines():
        if not line.startswith("{"):
            continue
        entry = json.loads(line)
        if entry.get("event") == event and all(entry.get(k) == v for k, v in match.items()):
            found.append(float(entry["seconds"]))
    return found[-last:]


def environment(repo: Path) -> dict[str, str]:
    """``repo`` first on the path; bytecode cached (as an installed package has it)."""
    env = {**os.environ, "PYTHONPATH": str(repo)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600, env=env)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} in {cwd} failed: {done.stderr}")
    return seconds


def odf(repo: Path, ws: Path, *args: str) -> float:
    """Seconds of ``odf ARGS`` of checkout ``repo`` in ``ws``."""
    return timed([sys.executable, "-m", "coordinator", *args], ws, environment(repo))


@contextmanager
def daemon(repo: Path, ws: Path) -> Iterator[None]:
    """``odf serve`` of ``repo`` in ``ws`` (its log appended to ``ws/serve.log``), until the
    block ends."""
    from tests.support.daemon import LOOPBACK_ANY_PORT

    info = ws / ".odf" / "run" / "daemon.json"
    flags = list(LOOPBACK_ANY_PORT)
    if "flight-sql-address" not in (repo / "coordinator" / "cli" / "daemon.py").read_text():
        i = flags.index("--flight-sql-address")  # a checkout from before Flight SQL
        del flags[i : i + 2]
    with open(ws / "serve.log", "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "coordinator", "serve", *flags],
            cwd=ws,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=environment(repo),
        )
    try:
        deadline = time.monotonic() + 120
        while not info.is_file():
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the daemon of {repo} did not start: {ws / 'serve.log'}")
            time.sleep(0.05)
        yield
    finally:
        process.terminate()
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def warm_ups(ws: Path) -> list[dict[str, object]]:
    """The warm-ups the daemons of ``ws`` have ended (their log's ``warm_up.done``)."""
    text = (ws / "serve.log").read_text(errors="replace")
    return [json.loads(line) for line in text.splitlines() if '"warm_up.done"' in line]


def workspaces(tmp: Path, baseline: Path | None, rows: int) -> dict[str, tuple[Path, Path]]:
    """Each side's checkout and workspace: ``new`` (this one) and, with a baseline, ``old``."""
    from tests.support.datasets import root
    from tests.support.workspace import add, new_workspace

    ws = new_workspace(tmp / "ws-new")
    add(ws, root("a", ["id BIGINT", "v STRING"]))
    (ws / "a.csv").write_text("id,v\n" + "".join(f"{i},v{i}\n" for i in range(rows)))
    odf(REPO, ws, "ingest", "a", "a.csv")
    sides = {"new": (REPO, ws)}
    if baseline is not None:
        old = tmp / "ws-old"
        shutil.copytree(ws, old, ignore=shutil.ignore_patterns("run"))
        sides["old"] = (baseline, old)
    return sides


def warm_queries(sides: dict[str, tuple[Path, Path]], repeats: int) -> dict[str, float]:
    """Medians: each side's count (``new``, ``old``), its daemon's ``Query`` call (``... call``),
    and the floors ``python -c pass`` and ``python -c 'import grpc'``, in turns."""
    floors = {
        "python -c pass": [sys.executable, "-c", "pass"],
        GRPC_FLOOR: [sys.executable, "-c", "import grpc"],
    }
    times: dict[str, list[float]] = {label: [] for label in [*sides, *floors]}
    with ExitStack() as stack:
        for repo, ws in sides.values():
            stack.enter_context(daemon(repo, ws))
            odf(repo, ws, "sql", "--command", COUNT)  # the daemon's engine starts once
            odf(repo, ws, "sql", "--command", COUNT)
        for _ in range(repeats):
            for label, (repo, ws) in sides.items():
                times[label].append(odf(repo, ws, "sql", "--command", COUNT))
            for label, argv in floors.items():
                times[label].append(timed(argv, REPO, environment(REPO)))
        medians = {label: statistics.median(t) for label, t in times.items()}
        for label, (_, ws) in sides.items():
            calls = logged_seconds(ws / "serve.log", "daemon.call", repeats, method="Query")
            medians[f"{label} call"] = statistics.median(calls)
        # The same count under a text never seen before: no plan the engine kept applies.
        fresh: dict[str, list[float]] = {label: [] for label in sides}
        for k in range(repeats):
            for label, (repo, ws) in sides.items():
                text = COUNT.replace(" AS n ", f" AS n{k} ")
                fresh[label].append(odf(repo, ws, "sql", "--command", text))
        for label, (_, ws) in sides.items():
            medians[f"{label} new text"] = statistics.median(fresh[label])
            calls = logged_seconds(ws / "serve.log", "daemon.call", repeats, method="Query")
            medians[f"{label} new text call"] = statistics.median(calls)
    return medians


def after_restart(sides: dict[str, tuple[Path, Path]], repeats: int) -> dict[str, float]:
    """Medians of each side's first ``repeats`` counts after its daemon starts again (this
    checkout's warmed up, the baseline's engine started by one other query), alternating;
    ``new warm-up`` is the seconds its warm-up took."""
    times: dict[str, list[float]] = {label: [] for label in sides}
    with ExitStack() as stack:
        for label, (repo, ws) in sides.items():
            ended = len(warm_ups(ws))
            stack.enter_context(daemon(repo, ws))
            if label == "new":
                deadline = time.monotonic() + WARM_UP_TIMEOUT_S
                while len(warm_ups(ws)) == ended:
                    if time.monotonic() > deadline:
                        raise SystemExit(f"no warm-up ended: {ws / 'serve.log'}")
                    time.sleep(0.1)
            else:
                odf(repo, ws, "sql", "--command", "SELECT 1 AS one")  # its engine starts
        for _ in range(repeats):
            for label, (repo, ws) in sides.items():
                times[label].append(odf(repo, ws, "sql", "--command", COUNT))
    medians = {label: statistics.median(t) for label, t in times.items()}
    done = warm_ups(sides["new"][1])[-1]
    medians["new warm-up"] = float(str(done["seconds"]))
    medians["new warm-up queries"] = float(str(done["queries"]))
    return medians


def daemon_figures(warm: dict[str, float], restarted: dict[str, float] | None) -> list[Figure]:
    """Print the rows; the figures (with their targets)."""
    floor = warm["python -c pass"]
    for label in ("new", "old"):
        if label not in warm:
            continue
        for kind, key in (("count", label), ("count, a text not seen before", f"{label} new text")):
            call = warm[f"{key} call"]
            print(
                f"odf sql ({kind}) through the {label} daemon: {warm[key] * 1e3:.0f} ms;"
                f" the daemon's Query call {call * 1e3:.0f}, the client process"
                f" {(warm[key] - call) * 1e3:.0f}"
            )
    grpc_floor = warm[GRPC_FLOOR]
    print(f"floors: python -c pass {floor * 1e3:.0f} ms, {GRPC_FLOOR} {grpc_floor * 1e3:.0f} ms")
    figures = [
        Figure("the daemon's own Query call (its log)", warm["new call"], "s"),
        Figure(
            "odf sql client process (the count minus the daemon's call)",
            warm["new"] - warm["new call"],
            "s",
        ),
        Figure("floor: python -c pass", floor, "s"),
        Figure(f"floor: {GRPC_FLOOR}", grpc_floor, "s"),
        Figure("odf sql count through the daemon", warm["new"], "s", None, DAEMON_QUERY_TARGET_S),
        Figure(
            "odf sql count, a text not seen before" + (" vs before" if "old" in warm else ""),
            warm["new new text"],
            "s",
            warm.get("old new text"),
        ),
    ]
    if "old" in warm:
        figures.append(
            Figure(
                "odf sql count through the daemon vs before",
                warm["new"],
                "s",
                warm["old"],
                DAEMON_QUERY_RATIO,
            )
        )
    if restarted is not None:
        print(
            f"after a restart: the warm-up replayed {restarted['new warm-up queries']:.0f}"
            f" queries in {restarted['new warm-up']:.1f} s (its engine's start included)"
        )
        figures.append(
            Figure(
                "odf sql count, first queries after a restart"
                + (" vs before (no warm-up)" if "old" in restarted else ""),
                restarted["new"],
                "s",
                restarted.get("old"),
            )
        )
    return figures


def show(figures: list[Figure]) -> bool:
    """Print the figures; whether every target is met."""
    failed = False
    for f in figures:
        ratio = "" if f.ratio is None else f" ratio {f.ratio:.2f}x"
        target = "" if f.target is None else f" target {f.target:g} {'ok' if f.ok else 'MISSED'}"
        print(f"{f.name:<60} {f.ours * 1e3:9.1f} ms{ratio}{target}")
        failed |= f.ok is False
    return not failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--baseline", type=Path, help="a checkout of the code before")
    parser.add_argument("--no-restart", action="store_true", help="leave out the restart part")
    parser.add_argument(
        "--restart-queries", type=int, default=10, help="queries timed after the restart"
    )
    add_json_argument(parser)
    args = parser.parse_args()
    baseline = args.baseline.resolve() if args.baseline else None
    with tempfile.TemporaryDirectory(prefix="bench-daemon-query-") as tmp:
        sides = workspaces(Path(tmp), baseline, args.rows)
        warm = warm_queries(sides, args.repeats)
        restarted = None if args.no_restart else after_restart(sides, args.restart_queries)
    figures = daemon_figures(warm, restarted)
    print()
    ok = show(figures)
    write_json(args.json, figures)
    print("OK" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
