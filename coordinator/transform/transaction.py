"""One engine transaction, from plan to settled result: the home of "run a transaction".

A transaction is: exchange files for the inputs (``exchange``), one engine call
(ExecuteTransform for a ``TransformPlan``, MigrateQuery for a ``MigrationPlan``), the output
checked and hashed into the events to commit (``output``), then a **policy** that settles it:

- ``Commit``: append the events to the dataset with a compare-and-swap of the plan's head
  (``odf pull``);
- ``Collect``: hand the events back uncommitted, to be committed with others (a query change
  commits its ``SetTransform`` and the migration together);
- ``CompareWithRecorded``: compare the events with the block the transaction recorded and
  commit nothing (``odf verify``'s replay).

Everything the transaction writes goes into a private staging directory of the dataset
(``Dataset.staging_dir``): input slices, the engine's data file and checkpoint. A commit moves
the outputs into the dataset in one atomic step; until then nothing is visible, and whatever
happens before it (engine crash, coordinator killed) leaves the dataset unchanged, so running
the pull again plans and produces the very same transaction: exactly once.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from common.background_imports import import_in_background
from common.logs import get_logger
from common.odf import engine_protocol as ep
from common.odf.events import ExecuteTransform, SetDataSchema
from common.odf.multihash import Multihash
from coordinator.config import ExchangeFormat
from coordinator.dataset import CommitItem, Dataset
from coordinator.engine.client import EngineClient
from coordinator.transform.errors import TransformError
from coordinator.transform.exchange import prepare_input
from coordinator.transform.plan import InputPlan, MigrationPlan, TransformPlan
from coordinator.transform.shared_staging import bring_back, exchange_area
from coordinator.transform.split import (
    CheckedSlice,
    SplitEngine,
    Splitter,
    event_time_range,
    split_items,
)

if TYPE_CHECKING:
    import pyarrow as pa

log = get_logger(__name__)

OUTPUT_MODULES = ("coordinator.transform.output",)
"""What reads the engine's output (its checks and hashes, pyarrow's Parquet reader and
compute kernels): imported while the engine works, so a one-shot command does not wait for
these imports before or after the engine call (``import_in_background``)."""

DATA_FILE = "data"
CHECKPOINT_FILE = "checkpoint"


# --- what a transaction produces -----------------------------------------------------------------


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
class Settled:
    """What a policy did with a transaction's events."""

    head: Multihash | None = None
    """The new head (``Commit``)."""
    differences: tuple[str, ...] = ()
    """How the events differ from the recorded block (``CompareWithRecorded``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionResult:
    items: tuple[CommitItem, ...]
    """The events of the transaction: a ``SetDataSchema`` when the output schema is new or
    has gained columns, then the ``ExecuteTransform``."""
    settled: Settled
    input_records: int
    timings: Timings

    @property
    def event(self) -> ExecuteTransform:
        event = self.items[-1].event
        assert isinstance(event, ExecuteTransform)
        return event

    @property
    def head(self) -> Multihash:
        """The head the transaction was committed as (only under the ``Commit`` policy)."""
        if self.settled.head is None:
            raise ValueError("the transaction was not committed")
        return self.settled.head

    @property
    def schema_changed(self) -> bool:
        return len(self.items) > 1

    @property
    def output_records(self) -> int:
        """Records of its ``ExecuteTransform`` events (a split transaction has several)."""
        total = 0
        for item in self.items:
            event = item.event
            if isinstance(event, ExecuteTransform) and event.new_data is not None:
                o = event.new_data.offset_interval
                total += o.end - o.start + 1
        return total


# --- policies ------------------------------------------------------------------------------------


class Policy(Protocol):
    """Settles a transaction's events (see the module doc)."""

    def settle(
        self, dataset: Dataset, plan: TransformPlan, items: Sequence[CommitItem]
    ) -> Settled: ...


class Commit:
    """Append the events to the dataset if its head is still the one the plan was made from."""

    def settle(self, dataset: Dataset, plan: TransformPlan, items: Sequence[CommitItem]) -> Settled:
        hashes = dataset.commit_events(
            items, expected_head=plan.expected_head, system_time=plan.system_time
        )
        return Settled(head=hashes[-1])


class Collect:
    """Commit nothing: the caller commits the events itself, within the staging directory's
    lifetime (``run_transaction``'s ``staging``)."""

    def settle(self, dataset: Dataset, plan: TransformPlan, items: Sequence[CommitItem]) -> Settled:
        return Settled()


@dataclass(frozen=True, slots=True)
class CompareWithRecorded:
    """Commit nothing; compare the events with the ``ExecuteTransform`` the block recorded."""

    recorded: ExecuteTransform

    def settle(self, dataset: Dataset, plan: TransformPlan, items: Sequence[CommitItem]) -> Settled:
        return Settled(differences=tuple(event_differences(self.recorded, items)))


COMMIT = Commit()
COLLECT = Collect()


# --- the transaction -----------------------------------------------------------------------------


def run_transaction(
    plan: TransformPlan | MigrationPlan,
    dataset: Dataset,
    inputs: Sequence[Dataset],
    engine: EngineClient,
    *,
    policy: Policy,
    exchange: ExchangeFormat = ExchangeFormat.PARQUET,
    staging: Path | None = None,
    shared_staging: Path | None = None,
    split: Splitter | None = None,
) -> TransactionResult:
    """Run ``plan`` on ``engine`` and settle its events with ``policy``.

    ``inputs`` are the input datasets, in the order of ``plan.inputs``. ``staging`` is a
    staging directory of ``dataset`` the caller keeps open (``Collect``: the events name files
    in it); by default the transaction opens its own, removed when it returns.
    ``shared_staging`` (``engine.stagingDir``): where the exchange files go instead, so that a
    cluster's executors reach them (``shared_staging.py``). ``split``: commit a large
    row-local transaction as the slices the engine's executors wrote (``split.py``).
    """
    if staging is not None:
        return _run(plan, dataset, inputs, engine, policy, exchange, staging, shared_staging, split)
    with dataset.staging_dir() as own:
        return _run(plan, dataset, inputs, engine, policy, exchange, own, shared_staging, split)


def _run(
    plan: TransformPlan | MigrationPlan,
    dataset: Dataset,
    inputs: Sequence[Dataset],
    engine: EngineClient,
    policy: Policy,
    fmt: ExchangeFormat,
    staging: Path,
    shared: Path | None,
    split: Splitter | None = None,
) -> TransactionResult:
    clock = _Clock()
    with exchange_area(shared, staging) as area:
        exchange = prepare_exchange(plan.inputs, inputs, area, fmt, link_inputs=area != staging)
        exchange_s = clock.lap()
        log.info("transform.engine_call", dataset=dataset.alias, records=exchange.input_records)
        import_in_background(OUTPUT_MODULES)
        if isinstance(plan, MigrationPlan):
            migrated = engine.migrate_query(migrate_request(plan, dataset, exchange))
            response = ep.TransformResponseSuccess(
                new_offset_interval=migrated.new_offset_interval,
                new_watermark=migrated.new_watermark,
            )
            transform_plan = plan.transform_plan
        else:
            request = transform_request(plan, dataset, exchange)
            # Parquet exchange only: the engine cuts slices at the inputs' files (their blocks).
            splits = split is not None and policy is COMMIT and fmt is ExchangeFormat.PARQUET
            if splits and split is not None and split.wants(plan, dataset, engine):
                assert isinstance(engine, SplitEngine)  # split.wants checked it
                slices = split.run(plan, request, engine, area)
                if slices is not None:
                    staged = _staged_slices(slices, area, staging)
                    timed = (exchange_s, clock)
                    return _settle_split(plan, dataset, policy, slices, staged, exchange, timed)
            response = engine.execute_transform(request)
            transform_plan = plan
        data_path, checkpoint_path = staging / "out" / DATA_FILE, staging / "out" / CHECKPOINT_FILE
        if area != staging:
            bring_back(exchange.data_path, data_path)
            bring_back(exchange.checkpoint_path, checkpoint_path)
    engine_s = clock.lap()
    from coordinator.transform.output import collect_output, commit_items  # OUTPUT_MODULES

    output = collect_output(
        response,
        transform_plan,
        data_path,
        checkpoint_path,
        flush=not isinstance(policy, CompareWithRecorded),
    )
    if output.schema is None and transform_plan.output_schema is None and policy is COMMIT:
        # No records yet, and no schema: the query's output schema is known all the same.
        output = replace(output, schema=validated_schema(engine, transform_plan, dataset))
    items = commit_items(transform_plan, output, response)
    hashing_s = clock.lap()
    settled = policy.settle(dataset, transform_plan, items)
    settle_s = clock.lap()
    return TransactionResult(
        items=tuple(items),
        settled=settled,
        input_records=exchange.input_records,
        timings=Timings(exchange=exchange_s, engine=engine_s, hashing=hashing_s, commit=settle_s),
    )


def _staged_slices(slices: Sequence[CheckedSlice], area: Path, staging: Path) -> list[Path | None]:
    """The slices' files in the dataset's staging directory (brought back from shared
    staging, their sizes checked again there by the commit)."""
    staged: list[Path | None] = []
    for n, s in enumerate(slices):
        if s.data_file is None or area == staging:
            staged.append(s.data_file)
            continue
        target = staging / "out" / f"slice-{n}"
        bring_back(s.data_file, target)
        staged.append(target)
    return staged


def _settle_split(
    plan: TransformPlan,
    dataset: Dataset,
    policy: Policy,
    slices: Sequence[CheckedSlice],
    staged: Sequence[Path | None],
    exchange: Exchange,
    timed: tuple[float, _Clock],
) -> TransactionResult:
    """Commit the K blocks of a split transaction with one head move (``timed``: the
    exchange's seconds, and the clock since)."""
    exchange_s, clock = timed
    engine_s = clock.lap()
    items = split_items(plan, slices, staged)
    hashing_s = clock.lap()
    settled = policy.settle(dataset, plan, items)
    times = event_time_range(slices)
    log.info(
        "transform.split_committed",
        dataset=dataset.alias,
        slices=len(slices),
        event_times=None if times is None else [t.isoformat() for t in times],
    )
    return TransactionResult(
        items=tuple(items),
        settled=settled,
        input_records=exchange.input_records,
        timings=Timings(
            exchange=exchange_s, engine=engine_s, hashing=hashing_s, commit=clock.lap()
        ),
    )


# --- requests ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Exchange:
    """The staging side of one engine call: input entries and where outputs go."""

    inputs: tuple[ep.TransformRequestInput, ...]
    data_path: Path
    checkpoint_path: Path
    input_records: int


def prepare_exchange(
    inputs: Sequence[InputPlan],
    datasets: Sequence[Dataset],
    staging: Path,
    fmt: ExchangeFormat,
    *,
    link_inputs: bool = False,
) -> Exchange:
    """Write the inputs' exchange files into ``staging/in``; outputs go to ``staging/out``.
    ``link_inputs``: Parquet inputs are linked (or copied) into ``staging/in`` too."""
    in_dir, out_dir = staging / "in", staging / "out"
    in_dir.mkdir()
    out_dir.mkdir()
    prepared = [
        prepare_input(p, ds, in_dir, i, fmt, link=link_inputs)
        for i, (p, ds) in enumerate(zip(inputs, datasets, strict=True))
    ]
    return Exchange(
        inputs=tuple(p.request for p in prepared),
        data_path=out_dir / DATA_FILE,
        checkpoint_path=out_dir / CHECKPOINT_FILE,
        input_records=sum(p.records for p in prepared),
    )


def transform_request(
    plan: TransformPlan, dataset: Dataset, exchange: Exchange
) -> ep.TransformRequest:
    return ep.TransformRequest(transform=plan.transform, **_request_fields(plan, dataset, exchange))


def migrate_request(
    plan: MigrationPlan, dataset: Dataset, exchange: Exchange
) -> ep.MigrateQueryRequest:
    new = plan.transform_plan
    return ep.MigrateQueryRequest(
        prev_transform=plan.prev_transform,
        new_transform=new.transform,
        **_request_fields(new, dataset, exchange),
    )


def _request_fields(plan: TransformPlan, dataset: Dataset, exchange: Exchange) -> dict[str, Any]:
    """What ExecuteTransform and MigrateQuery requests have in common."""
    return {
        "dataset_id": dataset.id,
        "dataset_alias": dataset.alias,
        "system_time": plan.system_time,
        "vocab": plan.vocab,
        "query_inputs": exchange.inputs,
        "next_offset": plan.next_offset,
        "prev_checkpoint_path": stored_checkpoint(dataset, plan.prev_checkpoint),
        "new_checkpoint_path": str(exchange.checkpoint_path),
        "new_data_path": str(exchange.data_path),
    }


def validated_schema(engine: EngineClient, plan: TransformPlan, dataset: Dataset) -> pa.Schema:
    """The output schema of ``plan``'s query over its inputs' schemas (ValidateQuery): what a
    derivative records before its first record, as the reference does. Only committed
    transactions do this; a replay compares the recorded ``ExecuteTransform`` alone, so chains
    written without it (older ones, the reference's) still verify."""
    request = plan.validate_request(dataset.alias)
    from common.serde.arrow_schema import decode_arrow_schema

    return decode_arrow_schema(engine.validate_query(request).output_schema)


def stored_checkpoint(dataset: Dataset, checkpoint: Multihash | None) -> str | None:
    """The path of a checkpoint the dataset recorded; it must still be stored."""
    if checkpoint is None:
        return None
    path = dataset.checkpoint_path(checkpoint)
    if not path.is_file():
        raise TransformError(
            f"dataset {dataset.alias!r}: its checkpoint {checkpoint} is not stored at {path}"
        )
    return str(path)


# --- comparing with a recorded block -------------------------------------------------------------


def event_differences(stored: ExecuteTransform, items: Sequence[CommitItem]) -> list[str]:
    """How the events of a run differ from the stored event (physical hash, size and the new
    checkpoint aside: Parquet and engines may encode the same records differently); a
    ``SetDataSchema`` among them means the output schema differs."""
    replayed = items[-1].event
    assert isinstance(replayed, ExecuteTransform)
    found = []
    if any(isinstance(i.event, SetDataSchema) for i in items[:-1]):
        found.append("output schema: the replay's columns differ from the dataset's schema")
    a, b = stored.new_data, replayed.new_data
    if a is not None and b is None:
        o = a.offset_interval
        found.append(f"newData: the block has offsets {o.start}..{o.end}, the replay no records")
    elif a is None and b is not None:
        o = b.offset_interval
        found.append(f"newData: the block has no records, the replay offsets {o.start}..{o.end}")
    elif a is not None and b is not None:
        if a.offset_interval != b.offset_interval:
            x, y = a.offset_interval, b.offset_interval
            found.append(
                f"newData.offsetInterval: the block has {x.start}..{x.end},"
                f" the replay {y.start}..{y.end}"
            )
        if a.logical_hash != b.logical_hash:
            found.append(
                f"newData.logicalHash: the block has {a.logical_hash},"
                f" the replay {b.logical_hash}: the records differ"
            )
    if stored.new_watermark != replayed.new_watermark:
        found.append(
            f"newWatermark: the block has {_time(stored.new_watermark)},"
            f" the replay {_time(replayed.new_watermark)}"
        )
    return found


def _time(value: datetime | None) -> str:
    return "none" if value is None else value.isoformat()


class _Clock:
    def __init__(self) -> None:
        self._last = time.perf_counter()

    def lap(self) -> float:
        now = time.perf_counter()
        elapsed, self._last = now - self._last, now
        return elapsed
