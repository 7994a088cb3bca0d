"""Split transactions on a Spark standalone cluster, black-box through the CLI.

The suite's shared cluster (``spark_cluster``: one Master and two single-core Workers,
tests/e2e/conftest.py), the embedded engine as its driver with shared staging,
``transform.split`` at ``minRecords: 1, slices: 3``, and ``spark.task.maxFailures 1`` in this
module's own copy of the cluster's Spark configuration (a lost task fails its job: the kill
below then shows what a failed split transaction leaves). Each test asks for ``spark_cluster``
so that it runs beside the suite's other cluster tests (conftest's ordering). A root
``cities`` gets three ingested blocks; ``big-cities`` (a filter and a projection: row-local)
and ``totals`` (an aggregation) derive from it; ``heavy`` explodes each of two ``seeds`` blocks
into numbers kept by their SHA-256 (seconds of executor work per block).

- The split pull of ``big-cities`` on the cluster commits three ordinary ExecuteTransform
  blocks whose records, offsets and event times are those of an unsplit pull of the same
  input (a copy of the workspace with ``minRecords`` above the backlog, in local mode); the
  aggregation over the same backlog commits one block.
- ``odf verify --recursive`` passes on the cluster; the dataset pushed to a ``file://``
  repository is pulled by another workspace with default configuration (nothing about
  splits, local mode) and verifies there: each block replays on its own.
- An executor killed with SIGKILL while it runs a task of ``heavy``'s split transaction: the
  pull fails with one error line, the head is unchanged and nothing is left in the shared
  staging directory; the retry commits both blocks.

The two processes of each step run side by side (their JVMs start at the same time).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from common.odf.events import AddData
from tests.e2e.test_split_cli import BATCHES
from tests.e2e.test_verify_cli import BIG_CITIES, CITIES, flip_middle_byte
from tests.integration.transform.pipeline import execute_transforms, records
from tests.support.cli import odf, ok, start_odf
from tests.support.datasets import derivative, root
from tests.support.spark_cluster import SparkCluster, SparkWorker, StandaloneCluster
from tests.support.workspace import add, dataset, new_workspace

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

TOTALS = derivative(
    "totals",
    "SELECT max(event_time) AS event_time, count(*) AS n, sum(population) AS total FROM cities",
    ["cities"],
)
SEEDS = 2
NUMBERS_PER_SEED = 500_000
HEAVY = derivative(
    "heavy",
    "SELECT event_time, seed, n FROM seeds"
    f" LATERAL VIEW explode(sequence(1, {NUMBERS_PER_SEED})) t AS n"
    " WHERE substr(sha2(concat(seed, ':', n), 256), 1, 3) = '000'",
    ["seeds"],
)
SPLIT = (
    "transform:\n  split:\n    minRecords: 1\n    slices: 3\n"
    "verify:\n  executorMinBytes: 0\n"  # the test's small files hashed by the executors too
)
UNSPLIT = "transform:\n  split:\n    minRecords: 1000000000\n"
BUSY_FOR_S = 1.0
CATCH_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Pipeline:
    ws: Path
    unsplit: Path
    env: dict[str, str]
    """The environment of an engine on the cluster, with this module's Spark configuration."""
    shared: Path


def both(*runs: tuple[Path, tuple[str, ...], dict[str, str] | None]) -> list[str]:
    """Run ``odf`` commands side by side; each must succeed. Their standard outputs."""
    started = [start_odf(cwd, *args, env=env) for cwd, args, env in runs]
    outs = []
    for (_, args, _), process in zip(runs, started, strict=True):
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, f"odf {' '.join(args)}:\n{out}\n{err}"
        outs.append(out)
    return outs


def build(ws: Path) -> Path:
    """The workspace: the datasets added, ``cities`` in three blocks, ``seeds`` in two."""
    new_workspace(ws)
    seeds = root("seeds", ["event_time TIMESTAMP", "seed BIGINT"], source="default")
    add(ws, CITIES, BIG_CITIES, TOTALS, seeds, HEAVY)
    for i, batch in enumerate(BATCHES):
        (ws / f"batch{i}.csv").write_text("event_time,city,population\n" + batch)
    ok(ws, "ingest", "cities", *(f"batch{i}.csv" for i in range(len(BATCHES))))
    for i in range(SEEDS):
        text = f"event_time,seed\n2024-01-0{i + 1}T00:00:00Z,{i * 7919}\n"
        (ws / f"seeds{i}.csv").write_text(text)
    ok(ws, "ingest", "seeds", *(f"seeds{i}.csv" for i in range(SEEDS)))
    return ws


@pytest.fixture(scope="module")
def pipeline(
    tmp_path_factory: pytest.TempPathFactory, _standalone_cluster: StandaloneCluster
) -> Iterator[Pipeline]:
    """The workspace pulled on the cluster (split) and its copy pulled unsplit locally."""
    base = tmp_path_factory.mktemp("split-cluster")
    shared = base / "shared-staging"
    shared.mkdir()
    with ThreadPoolExecutor(1) as pool:
        built = pool.submit(build, base / "ws")  # while the cluster starts
        cluster = _standalone_cluster.current()
        ws = built.result()
    unsplit = base / "unsplit"
    shutil.copytree(ws, unsplit)
    (unsplit / ".odf" / "config.yaml").write_text(UNSPLIT)
    conf_dir = shutil.copytree(cluster.conf_dir, base / "spark-conf")
    with open(conf_dir / "spark-defaults.conf", "a") as conf:
        conf.write("spark.task.maxFailures 1\n")
    env = {**cluster.engine_env(), "SPARK_CONF_DIR": str(conf_dir)}
    (ws / ".odf" / "config.yaml").write_text(
        f"engine:\n  master: {cluster.master_url}\n  stagingDir: file://{shared}\n" + SPLIT
    )
    both(
        (ws, ("pull", "big-cities", "totals"), env),
        (unsplit, ("pull", "big-cities"), None),
    )
    yield Pipeline(ws, unsplit, env, shared)


def test_a_split_pull_matches_the_unsplit_one_and_an_aggregation_is_not_split(
    pipeline: Pipeline, spark_cluster: SparkCluster
) -> None:
    split, unsplit = dataset(pipeline.ws, "big-cities"), dataset(pipeline.unsplit, "big-cities")
    events = [e for _, e in execute_transforms(split)]
    assert len(events) == 3, [e.new_data for e in events]
    assert len(execute_transforms(unsplit)) == 1
    # Each block names the input blocks it consumed: its own slice of the cities' offsets.
    assert [e.query_inputs[0].new_offset for e in events] == [2, 4, 6]
    assert [e.new_data.offset_interval.end if e.new_data else None for e in events] == [1, 2, 4]
    got, expected = records(split), records(unsplit)
    assert got.column("city").to_pylist() == ["B", "C", "D", "F", "G"]
    assert got.drop_columns(["system_time"]).equals(expected.drop_columns(["system_time"]))
    assert events[-1].new_watermark == execute_transforms(unsplit)[0][1].new_watermark
    # Not row-local: one block over the whole backlog.
    totals = execute_transforms(dataset(pipeline.ws, "totals"))
    assert len(totals) == 1
    table = records(dataset(pipeline.ws, "totals"))
    assert table.select(["n", "total"]).to_pylist()[-1] == {"n": 7, "total": 39850}


def test_the_split_dataset_verifies_here_and_in_a_workspace_that_pulled_it(
    pipeline: Pipeline, spark_cluster: SparkCluster, tmp_path: Path
) -> None:
    env = pipeline.env
    here = start_odf(pipeline.ws, "-v", "verify", "--recursive", "big-cities", "totals", env=env)
    try:
        repo = tmp_path / "repo"
        for name in ("cities", "big-cities"):
            ok(pipeline.ws, "push", name, "--to", f"file://{repo}/{name}")
        other = new_workspace(tmp_path / "other")
        ok(other, "pull", f"file://{repo}/big-cities", "--with-inputs")
        (there,) = both((other, ("verify", "--recursive", "big-cities"), None))
    finally:
        out, err = here.communicate(timeout=600)
    assert here.returncode == 0, f"{out}\n{err}"
    assert "big-cities: ok (" in out and "totals: ok (" in out, out
    assert "big-cities: ok (" in there and "3 replayed" in there, there
    pulled = dataset(other, "big-cities")
    assert records(pulled).equals(records(dataset(pipeline.ws, "big-cities")))
    # On the cluster the data files were hashed in the executors' tasks: each dataset's
    # files (cities 3, big-cities 3, totals 1), by executor processes, not the driver.
    hashed = [line for line in err.splitlines() if "verify.hashed_by_engine" in line]
    assert len(hashed) == 3, err
    assert all("executor " in line and "driver" not in line for line in hashed), hashed
    _tampered_file_is_named_by_the_executors(pipeline, spark_cluster)


def _tampered_file_is_named_by_the_executors(
    pipeline: Pipeline, spark_cluster: SparkCluster
) -> None:
    """A byte of one of ``cities``' data files changed (same size): ``odf verify cities`` on
    the cluster fails naming its block and file; the hash job's tasks ran on the executors
    (their logs; a root dataset has nothing to replay, so it is the application's only job)."""
    cities = dataset(pipeline.ws, "cities")
    block, event = next(
        (h, b.event) for h, b in cities.iter_blocks() if isinstance(b.event, AddData)
    )
    assert event.new_data is not None
    path = cities.data_path(event.new_data.physical_hash)
    original = path.read_bytes()
    earlier = [frozenset(w.executor_logs()) for w in spark_cluster.workers]
    flip_middle_byte(path)
    try:
        result = odf(pipeline.ws, "-v", "verify", "cities", env=pipeline.env)
    finally:
        path.write_bytes(original)
    assert result.returncode == 1, result
    mismatches = [line for line in result.stderr.splitlines() if line.startswith("mismatch:")]
    assert mismatches, result.stderr  # the bytes; and the records if the byte broke them
    sequence = [h for h, _ in cities.iter_blocks()][::-1].index(block)
    rel = f"data/{event.new_data.physical_hash}"
    assert mismatches[0].startswith(
        f"mismatch: cities: block {sequence} ({block}): data file {rel}"
    )
    assert "not to the physical hash the block records: the file was modified" in mismatches[0]
    assert "verify.hashed_by_engine" in result.stderr and "executor " in result.stderr
    finished = sum(w.finished_tasks(e) for w, e in zip(spark_cluster.workers, earlier, strict=True))
    assert finished == 3, finished  # one task per data file of cities


def _catch_busy(workers: tuple[SparkWorker, ...], pull: subprocess.Popen[str]) -> SparkWorker:
    """The first Worker whose executor has had one task of ``pull`` running for
    ``BUSY_FOR_S`` (not tasks in the logs of earlier applications on the shared cluster)."""
    earlier = [frozenset(w.executor_logs()) for w in workers]
    deadline = time.monotonic() + CATCH_TIMEOUT_S
    since: dict[tuple[int, str], float] = {}
    while time.monotonic() < deadline and pull.poll() is None:
        now = time.monotonic()
        for index, worker in enumerate(workers):
            tasks = worker.running_tasks(earlier[index])
            since = {k: t for k, t in since.items() if k[0] != index or k[1] in tasks}
            for tid in tasks:
                started = since.setdefault((index, tid), now)
                if now - started >= BUSY_FOR_S:
                    return worker
        time.sleep(0.2)
    raise AssertionError(f"no executor was busy for {BUSY_FOR_S} s (pull exit {pull.poll()})")


def test_an_executor_killed_mid_split_leaves_nothing_and_the_retry_commits(
    pipeline: Pipeline, spark_cluster: SparkCluster
) -> None:
    ws, env = pipeline.ws, pipeline.env
    head_before = dataset(ws, "heavy").state().head
    pull = start_odf(ws, "pull", "heavy", env=env)
    try:
        worker = _catch_busy(spark_cluster.workers, pull)
        assert worker.kill_executors() >= 1
        out, err = pull.communicate(timeout=CATCH_TIMEOUT_S)
    finally:
        if pull.poll() is None:
            pull.kill()
            pull.communicate()
    # spark.task.maxFailures 1: the lost task fails the job, so the transaction fails whole.
    assert pull.returncode == 1, f"{out}\n{err}"
    assert err.startswith("error: "), err
    heavy = dataset(ws, "heavy")
    assert heavy.state().head == head_before
    assert list(pipeline.shared.iterdir()) == []

    out = ok(ws, "pull", "heavy", env=env)
    heavy = dataset(ws, "heavy")
    events = [e for _, e in execute_transforms(heavy)]
    assert len(events) == SEEDS, [e.new_data for e in events]
    got = records(heavy)
    assert got.column("offset").to_pylist() == list(range(got.num_rows))
    assert sorted(set(got.column("seed").to_pylist())) == [i * 7919 for i in range(SEEDS)]
    # ~1/4096 of the numbers: a lost slice or partition would show as a much smaller count.
    expected = SEEDS * NUMBERS_PER_SEED / 4096
    assert 0.8 * expected < got.num_rows < 1.2 * expected, got.num_rows
    assert f"heavy: {got.num_rows} records" in out, out
