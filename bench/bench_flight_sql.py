"""Arrow Flight SQL served by the daemon, through the ADBC Flight SQL driver.

One workspace (a root ``big`` with ``--rows`` records in Parquet), one daemon; in one run:

- fetch throughput: ``SELECT * FROM big`` through ADBC (``cursor.execute``, then
  ``fetch_arrow_table``: the result streamed from the daemon) against pyarrow reading the
  dataset's own Parquet files (``pq.read_table``), in rows per second; target: ADBC's fetch at
  least half as fast. The query's run on the engine (``execute``) is reported apart.
- first-row latency of a small query (``SELECT * FROM big LIMIT 10``) on the warm daemon:
  through Flight SQL (execute until the first record batch arrives) against ``odf sql
  --command`` through the same daemon (a whole CLI process); target: under 0.5 s.

Medians of ``--runs``; exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import adbc_driver_flightsql
import adbc_driver_flightsql.dbapi as flight_sql
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.figures import Figure, add_json_argument, write_json  # noqa: E402
from tests.support.cli import odf  # noqa: E402
from tests.support.daemon import serving  # noqa: E402
from tests.support.datasets import root  # noqa: E402
from tests.support.workspace import add, new_workspace  # noqa: E402

THROUGHPUT_TARGET = 0.5
FIRST_ROW_TARGET_S = 0.5
SMALL = "SELECT * FROM big LIMIT 10"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3, help="runs per figure (medians)")
    add_json_argument(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-flight-sql-") as tmp:
        ws = new_workspace(Path(tmp) / "ws")
        add(ws, root("big", ["id BIGINT", "name STRING", "value DOUBLE"]))
        lines = "".join(f"{i},name-{i % 1000},{i * 0.5}\n" for i in range(args.rows))
        (ws / "big.csv").write_text("id,name,value\n" + lines)
        result = odf(ws, "ingest", "big", "big.csv", timeout=900)
        if result.returncode != 0:
            raise SystemExit(f"odf ingest failed: {result.stderr}")
        files = sorted(str(p) for p in (ws / ".odf" / "datasets" / "big" / "data").iterdir())
        with serving(ws) as served:
            url = f"grpc://{served.info['flightSqlAddress']}"
            header = adbc_driver_flightsql.DatabaseOptions.AUTHORIZATION_HEADER.value
            with flight_sql.connect(
                url, db_kwargs={header: f"Bearer {served.token}"}, autocommit=True
            ) as conn:
                figures = measure(conn, ws, files, args.rows, args.runs)
    write_json(args.json, figures)
    print(f"{'':44}{'ours':>12}{'baseline':>14}")
    ok = True
    for f in figures:
        base = f"{f.baseline:14.4g}" if f.baseline is not None else " " * 14
        verdict = "" if f.ok is None else ("ok" if f.ok else "MISSED")
        ok &= f.ok is not False
        print(f"{f.name:44}{f.ours:12.4g}{base}  {f.unit}  {verdict}")
    return 0 if ok else 1


def measure(conn: object, ws: Path, files: list[str], rows: int, runs: int) -> list[Figure]:
    cur = conn.cursor()  # type: ignore[attr-defined]
    cur.execute(SMALL)  # the daemon's engine starts once
    cur.fetch_arrow_table()
    executes, fetches, reads, first_rows, odf_sqls = [], [], [], [], []
    for _ in range(runs):
        started = time.perf_counter()
        cur.execute("SELECT * FROM big")
        executed = time.perf_counter()
        table = cur.fetch_arrow_table()
        fetched = time.perf_counter()
        assert table.num_rows == rows, table.num_rows
        executes.append(executed - started)
        fetches.append(fetched - executed)
        del table

        started = time.perf_counter()
        baseline = pq.read_table(files)
        reads.append(time.perf_counter() - started)
        assert baseline.num_rows == rows
        del baseline

        started = time.perf_counter()
        cur.execute(SMALL)
        reader = cur.fetch_record_batch()
        reader.read_next_batch()
        first_rows.append(time.perf_counter() - started)
        reader.read_all()

        started = time.perf_counter()
        result = odf(ws, "sql", "--command", SMALL)
        odf_sqls.append(time.perf_counter() - started)
        if result.returncode != 0:
            raise SystemExit(f"odf sql failed: {result.stderr}")
    cur.close()
    fetch_s, read_s = statistics.median(fetches), statistics.median(reads)
    return [
        Figure(
            f"Flight SQL fetch, {rows:,} rows (ADBC)",
            rows / fetch_s,
            "rows/s",
            baseline=rows / read_s,
            target=THROUGHPUT_TARGET,
            at_least=True,
        ),
        Figure(f"Flight SQL query run, {rows:,} rows", statistics.median(executes), "s"),
        Figure(
            "Flight SQL first row, small query (warm)",
            statistics.median(first_rows),
            "s",
            target=FIRST_ROW_TARGET_S,
        ),
        Figure("odf sql via the daemon, same query", statistics.median(odf_sqls), "s"),
    ]


if __name__ == "__main__":
    sys.exit(main())
