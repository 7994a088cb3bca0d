"""Running one planned transaction: exchange files, engine call, hashes, commit.

Everything the transaction writes goes into a private staging directory of the dataset
(``Dataset.staging_dir``): input slices, the engine's data file and checkpoint. The commit
moves the outputs into the dataset and appends the blocks with a compare-and-swap of the head
the plan was made from; until that atomic step nothing of the transaction is visible, and
whatever happens before it (engine crash, coordinator killed) leaves the dataset unchanged,
so running the pull again plans and produces the very same transaction: exactly once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import structlog

from common.odf import engine_protocol as ep
from common.odf.events import ExecuteTransform
from common.odf.multihash import Multihash
from coordinator.config import ExchangeFormat
from coordinator.dataset import Dataset
from coordinator.engine.client import EngineClient
from coordinator.transform.errors import TransformError
from coordinator.transform.exchange import prepare_input
from coordinator.transform.inputs import DerivativeInputs
from coordinator.transform.output import collect_output, commit_items
from coordinator.transform.plan import TransformPlan

log = structlog.get_logger(__name__)

DATA_FILE = "data"
CHECKPOINT_FILE = "checkpoint"


@dataclass(frozen=True, slots=True, kw_only=True)
class Timings:
    """Seconds spent in each step of a transaction (the engine's own time vs. overhead)."""

    exchange: float
    engine: float
    hashing: float
    commit: float

    @property
    def total(self) -> float:
        return self.exchange + self.engine + self.hashing + self.commit

    @property
    def overhead(self) -> float:
        """The coordinator's share: everything but the engine call."""
        return self.total - self.engine


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionResult:
    head: Multihash
    event: ExecuteTransform
    schema_changed: bool
    input_records: int
    timings: Timings

    @property
    def output_records(self) -> int:
        o = self.event.new_data.offset_interval if self.event.new_data else None
        return 0 if o is None else o.end - o.start + 1


def execute_plan(
    plan: TransformPlan,
    dataset: Dataset,
    inputs: DerivativeInputs,
    engine: EngineClient,
    exchange: ExchangeFormat = ExchangeFormat.ARROW,
) -> TransactionResult:
    """Run ``plan`` on ``engine`` and commit its result to ``dataset``."""
    with dataset.staging_dir() as staging:
        clock = _Clock()
        request, input_records = _build_request(plan, dataset, inputs, staging, exchange)
        exchange_s = clock.lap()
        log.info("transform.engine_call", dataset=dataset.alias, records=input_records)
        response = engine.execute_transform(request)
        engine_s = clock.lap()
        output = collect_output(
            response, plan, Path(request.new_data_path), Path(request.new_checkpoint_path)
        )
        items = commit_items(plan, output, response)
        hashing_s = clock.lap()
        hashes = dataset.commit_events(
            items, expected_head=plan.expected_head, system_time=plan.system_time
        )
        commit_s = clock.lap()
    event = items[-1].event
    assert isinstance(event, ExecuteTransform)
    return TransactionResult(
        head=hashes[-1],
        event=event,
        schema_changed=len(items) > 1,
        input_records=input_records,
        timings=Timings(exchange=exchange_s, engine=engine_s, hashing=hashing_s, commit=commit_s),
    )


def _build_request(
    plan: TransformPlan,
    dataset: Dataset,
    inputs: DerivativeInputs,
    staging: Path,
    exchange: ExchangeFormat,
) -> tuple[ep.TransformRequest, int]:
    in_dir, out_dir = staging / "in", staging / "out"
    in_dir.mkdir()
    out_dir.mkdir()
    prepared = [
        prepare_input(p, inputs.dataset(p.dataset_id), in_dir, i, exchange)
        for i, p in enumerate(plan.inputs)
    ]
    request = ep.TransformRequest(
        dataset_id=dataset.id,
        dataset_alias=dataset.alias,
        system_time=plan.system_time,
        vocab=plan.vocab,
        transform=plan.transform,
        query_inputs=tuple(p.request for p in prepared),
        next_offset=plan.next_offset,
        prev_checkpoint_path=_checkpoint_path(dataset, plan.prev_checkpoint),
        new_checkpoint_path=str(out_dir / CHECKPOINT_FILE),
        new_data_path=str(out_dir / DATA_FILE),
    )
    return request, sum(p.records for p in prepared)


def _checkpoint_path(dataset: Dataset, checkpoint: Multihash | None) -> str | None:
    if checkpoint is None:
        return None
    path = dataset.checkpoint_path(checkpoint)
    if not path.is_file():
        raise TransformError(
            f"dataset {dataset.alias!r}: its last checkpoint {checkpoint} is not stored at {path}"
        )
    return str(path)


class _Clock:
    def __init__(self) -> None:
        self._last = time.perf_counter()

    def lap(self) -> float:
        now = time.perf_counter()
        elapsed, self._last = now - self._last, now
        return elapsed
