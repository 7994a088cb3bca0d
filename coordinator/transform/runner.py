"""Bringing derivative datasets up to date: plan, execute and commit until nothing is left.

``Transformer`` serves one command: its engines (``EngineSession``) are started on first use
and kept warm for every transaction of every dataset, then stopped. ``transform`` runs a
dataset's transactions one after another, each bounded by ``max_input_records`` per input,
until its inputs are fully processed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from common.logs import get_logger
from common.odf.identity import DatasetID
from coordinator.config import TransformConfig
from coordinator.dataset import Dataset
from coordinator.dataset.provenance import check_may_run
from coordinator.engine import EngineMounts, EngineSession
from coordinator.transform.graph import Resolver, input_ids
from coordinator.transform.inputs import load_inputs
from coordinator.transform.plan import UpToDate, plan_next
from coordinator.transform.split import Splitter
from coordinator.transform.transaction import COMMIT, TransactionResult, run_transaction
from coordinator.workspace import Workspace

log = get_logger(__name__)

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class TransformOutcome:
    """What ``Transformer.transform`` did to one dataset."""

    dataset: str
    transactions: tuple[TransactionResult, ...]
    status: str
    """Why it stopped: ``up to date``, or what it is waiting for."""

    @property
    def output_records(self) -> int:
        return sum(t.output_records for t in self.transactions)

    def summary(self) -> str:
        if not self.transactions:
            return f"{self.dataset}: {self.status}"
        head = self.transactions[-1].head
        return (
            f"{self.dataset}: {len(self.transactions)} transaction(s),"
            f" {self.output_records} new record(s), head {head}"
        )


class Transformer:
    """Transforms derivative datasets with the engines of one ``EngineSession``."""

    def __init__(
        self,
        resolve: Resolver,
        engines: EngineSession,
        options: TransformConfig | None = None,
        *,
        clock: Clock = utc_now,
        shared_staging: Path | None = None,
    ) -> None:
        """``shared_staging``: ``engine.stagingDir`` (see ``shared_staging.py``)."""
        self.resolve = resolve
        self.shared_staging = shared_staging
        self.engines = engines
        self.options = options or TransformConfig()
        self.clock = clock
        self.splitter = Splitter(self.options.split)

    def transform(self, dataset: Dataset) -> TransformOutcome:
        """Run transactions until the dataset has processed all its inputs' data."""
        results: list[TransactionResult] = []
        for step in self.steps(dataset):
            if isinstance(step, UpToDate):
                return TransformOutcome(
                    dataset=dataset.alias, transactions=tuple(results), status=step.reason
                )
            results.append(step)
        raise AssertionError("steps() always ends with UpToDate")

    def steps(self, dataset: Dataset) -> Iterator[TransactionResult | UpToDate]:
        """Each committed transaction as it happens, then why the dataset is done."""
        check_may_run(dataset.layout, dataset.alias, "running its transform")
        dataset.clean_leftovers()
        inputs = load_inputs(dataset.state(), self.resolve)
        while True:
            plan = plan_next(
                dataset.state(),
                inputs.windows,
                max_records=self.options.max_input_records,
                now=self.clock(),
            )
            if isinstance(plan, UpToDate):
                yield plan
                return
            engine = self.engines.get(plan.transform.version)
            result = run_transaction(
                plan,
                dataset,
                [inputs.dataset(p.dataset_id) for p in plan.inputs],
                engine,
                policy=COMMIT,
                exchange=self.options.exchange,
                shared_staging=self.shared_staging,
                split=self.splitter,
            )
            log.info(
                "transform.committed",
                dataset=dataset.alias,
                head=str(result.head),
                input_records=result.input_records,
                output_records=result.output_records,
                engine_s=round(result.timings.engine, 3),
                overhead_s=round(result.timings.overhead, 3),
            )
            yield result


def workspace_resolver(ws: Workspace) -> Resolver:
    def resolve(dataset_id: DatasetID) -> Dataset:
        return ws.open_dataset(dataset_id.to_did())

    return resolve


def engine_mounts(datasets: Sequence[Dataset], resolve: Resolver) -> EngineMounts:
    """What an engine in a container needs for ``datasets``: their staging areas writable
    (transform outputs, preprocess files), checkpoints and inputs' data read-only."""
    read_only, read_write = [], []
    for ds in datasets:
        read_write.append(ds.layout.staging_root)
        inputs = input_ids(ds)
        if inputs:
            read_only.append(ds.layout.checkpoints_dir)
            read_only += [resolve(i).layout.data_dir for i in inputs]
    return EngineMounts.of(read_only, read_write)
