"""The daemon under load and soak: throughput and latencies per kind of client, the daemon's
threads and memory against their baseline, and what survives SIGKILL.

``tests/support/soak.py`` runs it (20 clients mixing ingest, SQL, simple pulls and smart
pushes, beside slow and idle clients, for ``--seconds``; then SIGKILL and a restart). Figures:
operations per second and p50/p99 latency of each kind, the daemon's threads and RSS after the
warm-up, at the peak and once the clients left, and the restart time. Targets: no failed
operation, no acknowledged record or push lost, every dataset verified. Exits 1 when missed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.figures import Figure, add_json_argument, write_json  # noqa: E402
from tests.support.soak import KINDS, Mix, Report, run  # noqa: E402


def figures(report: Report) -> list[Figure]:
    found = [
        Figure("soak: failed operations", float(len(report.errors)), "ops", target=0.0),
        Figure(
            "soak: acknowledged records lost after SIGKILL",
            float(report.acknowledged_records - report.records_after_restart),
            "records",
            target=0.0,
        ),
        Figure(
            "soak: datasets failing verify",
            float(sum(not ok for ok in report.verified.values())),
            "datasets",
            target=0.0,
        ),
    ]
    for kind in KINDS:
        found.append(Figure(f"soak: {kind} throughput", report.throughput(kind), "ops/s"))
        found.append(Figure(f"soak: {kind} p50", report.percentile(kind, 50), "s"))
        found.append(Figure(f"soak: {kind} p99", report.percentile(kind, 99), "s"))
    for label, (threads, rss) in (
        ("baseline", report.baseline),
        ("peak", report.loaded),
        ("after", report.after),
    ):
        found.append(Figure(f"soak: daemon threads, {label}", float(threads), "threads"))
        found.append(Figure(f"soak: daemon RSS, {label}", rss / 1024, "MiB"))
    found.append(Figure("soak: restart after SIGKILL", report.restart_seconds, "s"))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300.0, help="how long the load lasts")
    add_json_argument(parser)
    args = parser.parse_args()
    mix = Mix()
    with tempfile.TemporaryDirectory(prefix="bench-soak-") as tmp:
        report = run(Path(tmp), args.seconds, mix)
    found = figures(report)
    print(f"{mix.clients} clients, {mix.slow} slow, {mix.idle} idle, {mix.idle_ws} idle WebSockets")
    for f in found:
        print(f"{f.name:48} {f.ours:12.3f} {f.unit}")
    for error in report.errors[:20]:
        print(f"error: {error}")
    write_json(args.json, found)
    return 0 if all(f.ok is not False for f in found) else 1


if __name__ == "__main__":
    sys.exit(main())
