"""The example pipeline on a Spark standalone cluster gives what local mode gives.

One Master and two single-core Workers (512 MiB executors) from pip pyspark's ``spark-class``
(tests/support/spark_cluster.py), ``engine.master: spark://...``; the embedded engine is the
driver and the executors run the queries. The cluster run uses shared staging
(``engine.stagingDir``, a directory standing for storage every node mounts): the transactions'
inputs and outputs are put there, and the executors write the row-wise outputs themselves
(their logs show the output committed under the staging directory). The first round of the
pipeline of tests/integration/transform/pipeline.py (two roots, a derivative, a derivative of
it and a temporal join) runs in local mode and on the cluster: records, offsets and logical
hashes of every derivative are the same, and nothing is left in the staging directory. About
1 minute on this shared machine (two rounds: ~3).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.e2e.test_transform_cli import run_pipeline
from tests.integration.transform.pipeline import DERIVATIVES, execute_transforms, records
from tests.support.spark_cluster import standalone_cluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
ROUNDS = 1


def test_pipeline_on_a_standalone_cluster_matches_local_mode(tmp_path: Path) -> None:
    local = run_pipeline(tmp_path / "local", ROUNDS)
    shared = tmp_path / "shared-staging"
    shared.mkdir()
    with standalone_cluster(tmp_path / "cluster", workers=2) as cluster:
        config = f"engine:\n  master: {cluster.master_url}\n  stagingDir: file://{shared}\n"
        on_cluster = run_pipeline(tmp_path / "on-cluster", ROUNDS, config, cluster.engine_env())
        log = (tmp_path / "cluster" / "master.log").read_text(errors="replace")
        assert "Launching executor" in log or "Granted executor" in log, "no executor ran"
    executor_logs = "".join(
        p.read_text(errors="replace") for p in (tmp_path / "cluster" / "work").rglob("stderr")
    )
    # Executors read the inputs and wrote the outputs in the transactions' shared areas.
    area = re.escape(f"{shared}/odf-tx-")
    assert re.search(rf"Reading File path: file:/*{area}\S+/in/input-", executor_logs)
    assert re.search(rf"Saved output of task \S+ to file:/*{area}\S+/out/", executor_logs)
    assert list(shared.iterdir()) == []
    for name in DERIVATIVES:
        expected, got = local.dataset(name), on_cluster.dataset(name)
        assert records(got).equals(records(expected)), name
        assert [
            (e.new_data.offset_interval, e.new_data.logical_hash) if e.new_data else None
            for _, e in execute_transforms(got)
        ] == [
            (e.new_data.offset_interval, e.new_data.logical_hash) if e.new_data else None
            for _, e in execute_transforms(expected)
        ], name
