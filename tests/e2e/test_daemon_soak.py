"""The daemon under load (a short soak: the figures are ``bench/bench_soak.py``'s): 20 clients
mixing ingest, SQL, pull and push beside slow and idle ones, then SIGKILL and a restart.
Nothing acknowledged is lost, every dataset verifies, and the daemon's threads come back to
their baseline once the clients leave (plus the gRPC server's bounded pool of workers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.soak import KINDS, POOL_THREADS, Mix, run

pytestmark = pytest.mark.e2e

SECONDS = 15.0
"""Long enough for every race the soak is after: all 20 clients and the hostile ones at once,
each kind many times over, and the slow clients cut off by the daemon's header timeout (10 s)
while the load goes on."""


def test_nothing_acknowledged_is_lost_and_every_dataset_verifies(tmp_path: Path) -> None:
    mix = Mix()
    assert mix.clients >= 20
    report = run(tmp_path, SECONDS, mix)
    assert report.errors == []
    for kind in KINDS:
        assert report.latencies[kind], f"no {kind} completed"
    assert report.records_after_restart == report.acknowledged_records
    assert report.verified and all(report.verified.values()), report.verified
    assert {f"p{i}" for i in range(mix.push)} <= set(report.pushed_heads)
    # every connection's thread is gone; the gRPC pool keeps its (bounded) idle workers
    assert report.after[0] <= report.baseline[0] + POOL_THREADS, (report.baseline, report.after)
