"""The CLI through a running daemon against the same commands in process (``--no-daemon``).

Both sides run in one invocation, on one workspace (a root ``a`` with ``--rows`` records, a
derivative ``b`` over it), as real ``odf`` processes, alternating:

- ``odf sql --command 'SELECT count(*) ...'``: with the daemon, the warm engine answers; in
  process, every command starts its own engine.
- ``odf pull b`` after a small ``odf ingest a`` (not timed): one transaction.

The daemon runs with ``followLineage: false`` so that ``odf pull`` does the transaction (the
scheduler would otherwise run it first). Medians are reported; targets: the query at least 10x
faster through the daemon (and under a second), the pull at least 5x. Exits 1 when missed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.cli import odf  # noqa: E402
from tests.support.daemon import serving  # noqa: E402
from tests.support.datasets import derivative, root  # noqa: E402
from tests.support.workspace import add, new_workspace  # noqa: E402

QUERY_TARGET = 10.0
PULL_TARGET = 5.0
COUNT = "SELECT count(*) AS n FROM b"


def timed(ws: Path, *args: str) -> float:
    started = time.perf_counter()
    result = odf(ws, *args)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"odf {' '.join(args)} failed: {result.stderr}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3, help="runs per side (medians)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-daemon-") as tmp:
        ws = new_workspace(Path(tmp) / "ws")
        add(
            ws,
            root("a", ["id BIGINT", "v STRING"]),
            derivative("b", "SELECT event_time, id, upper(v) AS v FROM a", ["a"]),
        )
        (ws / ".odf" / "config.yaml").write_text("daemon:\n  followLineage: false\n")
        (ws / "big.csv").write_text("id,v\n" + "".join(f"{i},v{i}\n" for i in range(args.rows)))
        (ws / "small.csv").write_text("id,v\n-1,w\n")
        odf(ws, "ingest", "a", "big.csv")
        odf(ws, "pull", "b")
        sql: dict[str, list[float]] = {"daemon": [], "no-daemon": []}
        pull: dict[str, list[float]] = {"daemon": [], "no-daemon": []}
        with serving(ws):
            timed(ws, "sql", "--command", COUNT)  # the daemon's engine starts once
            for _ in range(args.runs):
                for side, extra in (("daemon", ()), ("no-daemon", ("--no-daemon",))):
                    sql[side].append(timed(ws, "sql", "--command", COUNT, *extra))
                    odf(ws, "ingest", "a", "small.csv", *extra)
                    pull[side].append(timed(ws, "pull", "b", *extra))
    print(f"{'':28}{'daemon':>10}{'in process':>12}{'ratio':>8}")
    ok = True
    for name, runs, target in (
        ("odf sql (count)", sql, QUERY_TARGET),
        ("odf pull b", pull, PULL_TARGET),
    ):
        d, n = statistics.median(runs["daemon"]), statistics.median(runs["no-daemon"])
        ratio = n / d
        met = ratio >= target and (name != "odf sql (count)" or d < 1.0)
        ok &= met
        verdict = "ok" if met else "MISSED"
        print(f"{name:28}{d:9.2f}s{n:11.2f}s{ratio:7.1f}x  target {target:.0f}x {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
