"""The example pipeline on a Spark standalone cluster gives what local mode gives.

One Master and two single-core Workers (512 MiB executors) from pip pyspark's ``spark-class``
(tests/support/spark_cluster.py, the cluster the e2e tests share), ``engine.master:
spark://...``; the embedded engine is the driver and the executors run the queries. The cluster
run uses shared staging (``engine.stagingDir``, a directory standing for storage every node
mounts): the transactions' inputs and outputs are put there, and the executors write the row-
wise outputs themselves (their logs show the output committed under the staging directory). The
first round of the pipeline of tests/integration/transform/pipeline.py (two roots, a
derivative, a derivative of it and a temporal join) runs on the cluster: records, offsets and
logical hashes of every derivative are those of the first round in local mode (the e2e tests'
shared embedded run, ``embedded_run``), and nothing is left in the staging directory. About 1
minute on this shared machine (two rounds: ~3).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.e2e.test_transform_cli import PipelineRun, run_pipeline
from tests.integration.transform.pipeline import (
    DERIVATIVES,
    records,
    records_of_first,
    transaction_slices,
)
from tests.support.spark_cluster import SparkCluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
ROUNDS = 1


def test_pipeline_on_a_standalone_cluster_matches_local_mode(
    tmp_path: Path, spark_cluster: SparkCluster, embedded_run: PipelineRun
) -> None:
    shared = tmp_path / "shared-staging"
    shared.mkdir()
    cluster = spark_cluster
    assert cluster.master_log is not None
    logged_before = len(cluster.master_log.read_bytes())
    config = f"engine:\n  master: {cluster.master_url}\n  stagingDir: file://{shared}\n"
    on_cluster = run_pipeline(tmp_path / "on-cluster", ROUNDS, config, cluster.engine_env())
    log = cluster.master_log.read_bytes()[logged_before:].decode(errors="replace")
    assert "Launching executor" in log or "Granted executor" in log, "no executor ran"
    executor_logs = "".join(
        p.read_text(errors="replace") for w in cluster.workers for p in w.executor_logs()
    )
    # Executors read the inputs and wrote the outputs in the transactions' shared areas.
    area = re.escape(f"{shared}/odf-tx-")
    assert re.search(rf"Reading File path: file:/*{area}\S+/in/input-", executor_logs)
    assert re.search(rf"Saved output of task \S+ to file:/*{area}\S+/out/", executor_logs)
    assert list(shared.iterdir()) == []
    for name in DERIVATIVES:
        expected, got = embedded_run.dataset(name), on_cluster.dataset(name)
        assert transaction_slices(got) == transaction_slices(expected)[:ROUNDS], name
        assert records(got).equals(records_of_first(expected, ROUNDS)), name
