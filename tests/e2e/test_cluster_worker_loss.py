"""A Worker killed in the middle of a transaction on a Spark standalone cluster.

One Master and two single-core Workers (tests/support/spark_cluster.py, the cluster the e2e
tests share: the killed Worker is replaced for the next test). ``heavy`` derives
from four seed records: each seed is exploded into two million numbers over four partitions
and only the numbers whose SHA-256 starts with ``000`` are kept (about 2000 records; SHA-256 keeps
every task busy for seconds, and no UDF is needed, which the sandbox would refuse). While
both executors run tasks of that transaction, one Worker and its executor are killed with
SIGKILL, as a crashed machine would be. Either Spark reruns the lost tasks on the other Worker
and the transaction commits once, or the pull fails cleanly with the head unchanged and a
retry on the surviving Worker commits. The test says which happened; either way the chain has
one transaction with offsets from 0, and ``odf verify`` replays it in local mode with the same
logical hash. 3.5 to 5 minutes on this shared 2-core machine under a load average of 15
(starting the cluster and the engine on it take about a minute, the replay in local mode
another): it needs a cluster, a transaction long enough to be caught, and a replay.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.transform.pipeline import execute_transforms, records
from tests.support.cli import ok, start_odf
from tests.support.datasets import derivative, root
from tests.support.spark_cluster import SparkCluster, SparkWorker
from tests.support.workspace import dataset

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

SEEDS = 4
NUMBERS_PER_SEED = 2_000_000
HEAVY_QUERY = (
    "SELECT s.event_time, s.seed, n FROM"
    f" (SELECT /*+ REPARTITION({SEEDS}) */ event_time, seed FROM seeds) AS s"
    f" LATERAL VIEW explode(sequence(1, {NUMBERS_PER_SEED})) t AS n"
    " WHERE substr(sha2(concat(s.seed, ':', n), 256), 1, 3) = '000'"
)
BUSY_FOR_S = 1.0
"""A task counts as "in the middle" once it has run this long (the engine's warm-up tasks and
the input scan take well under a second)."""
CATCH_TIMEOUT_S = 420.0


def _catch_both_busy(
    workers: tuple[SparkWorker, ...], earlier: frozenset[Path], pull: subprocess.Popen[str]
) -> None:
    """Wait until each Worker's executor has had the same task running for ``BUSY_FOR_S``."""
    deadline = time.monotonic() + CATCH_TIMEOUT_S
    since: dict[tuple[int, str], float] = {}
    while time.monotonic() < deadline and pull.poll() is None:
        now = time.monotonic()
        busy = 0
        for index, worker in enumerate(workers):
            tasks = worker.running_tasks(earlier)
            since = {k: t for k, t in since.items() if k[0] != index or k[1] in tasks}
            for tid in tasks:
                since.setdefault((index, tid), now)
            if any(now - t >= BUSY_FOR_S for (i, _), t in since.items() if i == index):
                busy += 1
        if busy == len(workers):
            return
        time.sleep(0.2)
    logs = [str(log) for worker in workers for log in worker.executor_logs()]
    raise AssertionError(f"the executors were not both busy (pull exit {pull.poll()}): {logs}")


def test_a_worker_killed_mid_transaction(tmp_path: Path, spark_cluster: SparkCluster) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    ok(ws, "init")
    snapshots = tmp_path / "snapshots"
    snapshots.mkdir()
    (snapshots / "seeds.yaml").write_text(
        root("seeds", ["event_time TIMESTAMP", "seed BIGINT"], source="default")
    )
    (snapshots / "heavy.yaml").write_text(derivative("heavy", HEAVY_QUERY, ["seeds"]))
    ok(ws, "add", "--recursive", str(snapshots))
    seeds = tmp_path / "seeds.csv"
    seeds.write_text(
        "event_time,seed\n"
        + "".join(f"2024-01-0{i + 1}T00:00:00Z,{i * 7919}\n" for i in range(SEEDS))
    )
    ok(ws, "ingest", "seeds", str(seeds))
    head_before = dataset(ws, "heavy").state().head

    cluster = spark_cluster
    earlier = frozenset(log for worker in cluster.workers for log in worker.executor_logs())
    (ws / ".odf" / "config.yaml").write_text(f"engine:\n  master: {cluster.master_url}\n")
    pull = start_odf(ws, "pull", "heavy", env=cluster.engine_env())
    try:
        _catch_both_busy(cluster.workers, earlier, pull)
        cluster.workers[0].kill()
        out, err = pull.communicate(timeout=CATCH_TIMEOUT_S)
    finally:
        if pull.poll() is None:
            pull.kill()
            pull.communicate()
    if pull.returncode == 0:
        outcome = "rerun"
    else:
        # Failed cleanly: one error line, nothing committed; a retry on the Worker left.
        assert pull.returncode == 1, f"{out}\n{err}"
        assert err.startswith("error: "), err
        assert dataset(ws, "heavy").state().head == head_before
        out = ok(ws, "pull", "heavy", env=cluster.engine_env())
        outcome = "retried"
    print(f"worker killed mid-transaction: {outcome}")

    heavy = dataset(ws, "heavy")
    transactions = execute_transforms(heavy)
    assert len(transactions) == 1, f"{outcome}: {len(transactions)} transactions"
    new_data = transactions[0][1].new_data
    assert new_data is not None and new_data.offset_interval.start == 0
    got = records(heavy)
    assert got.num_rows == new_data.offset_interval.end + 1
    assert got.column("offset").to_pylist() == list(range(got.num_rows))
    # ~1/4096 of the numbers: a lost partition would show as a much smaller count.
    expected = SEEDS * NUMBERS_PER_SEED / 4096
    assert 0.9 * expected < got.num_rows < 1.1 * expected, got.num_rows
    assert f"heavy: {got.num_rows} records" in out, out

    # The replay in local mode gives the same logical hash: the cluster's records are local
    # mode's, and the chain is valid.
    (ws / ".odf" / "config.yaml").write_text("engine:\n  master: local[2]\n")
    report = ok(ws, "verify", "heavy")
    assert "heavy: ok (" in report and "1 replayed" in report, report
