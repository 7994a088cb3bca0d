"""Engine requests of recorded transactions: ExecuteTransform and MigrateQuery.

A replayed transaction must send the engine exactly what the original one sent: the same
system time, transform, input slices, explicit watermarks and previous checkpoint. The input
side is an ``InputPlan`` per input (``input_history.recorded_input_plan``), turned into
exchange files in a staging directory by the transform executor's own ``prepare_input``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from common.odf import engine_protocol as ep
from common.odf.fragments import DatasetVocabulary, TransformSql
from common.odf.multihash import Multihash
from coordinator.config import ExchangeFormat
from coordinator.dataset import Dataset
from coordinator.transform.exchange import prepare_input
from coordinator.transform.plan import InputPlan, TransformPlan
from coordinator.verify.errors import ReplayError

DATA_FILE = "data"
CHECKPOINT_FILE = "checkpoint"


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrationPlan:
    """The switch of a dataset from ``prev_transform`` to ``new_transform`` (MigrateQuery).

    The inputs are at rest (no new blocks): the migration consumes no input data, it only
    hands the engine's state over to the new query.
    """

    expected_head: Multihash
    system_time: datetime
    prev_transform: TransformSql
    new_transform: TransformSql
    vocab: DatasetVocabulary
    prev_offset: int | None
    prev_checkpoint: Multihash | None
    prev_watermark: datetime | None
    output_schema: bytes | None
    inputs: tuple[InputPlan, ...]

    def transform_plan(self) -> TransformPlan:
        """The same transaction seen as a transform of ``new_transform`` (for its events)."""
        return TransformPlan(
            expected_head=self.expected_head,
            system_time=self.system_time,
            transform=self.new_transform,
            vocab=self.vocab,
            prev_offset=self.prev_offset,
            prev_checkpoint=self.prev_checkpoint,
            prev_watermark=self.prev_watermark,
            output_schema=self.output_schema,
            inputs=self.inputs,
        )


@dataclass(frozen=True, slots=True)
class Exchange:
    """The staging side of one engine call: input entries and where outputs go."""

    inputs: tuple[ep.TransformRequestInput, ...]
    data_path: Path
    checkpoint_path: Path


def prepare_exchange(
    inputs: Sequence[InputPlan],
    datasets: Sequence[Dataset],
    staging: Path,
    fmt: ExchangeFormat,
) -> Exchange:
    """Write the inputs' exchange files into ``staging/in``; outputs go to ``staging/out``."""
    in_dir, out_dir = staging / "in", staging / "out"
    in_dir.mkdir()
    out_dir.mkdir()
    prepared = [
        prepare_input(p, ds, in_dir, i, fmt)
        for i, (p, ds) in enumerate(zip(inputs, datasets, strict=True))
    ]
    return Exchange(
        inputs=tuple(p.request for p in prepared),
        data_path=out_dir / DATA_FILE,
        checkpoint_path=out_dir / CHECKPOINT_FILE,
    )


def transform_request(
    plan: TransformPlan, dataset: Dataset, exchange: Exchange
) -> ep.TransformRequest:
    return ep.TransformRequest(
        dataset_id=dataset.id,
        dataset_alias=dataset.alias,
        system_time=plan.system_time,
        vocab=plan.vocab,
        transform=plan.transform,
        query_inputs=exchange.inputs,
        next_offset=plan.next_offset,
        prev_checkpoint_path=stored_checkpoint(dataset, plan.prev_checkpoint),
        new_checkpoint_path=str(exchange.checkpoint_path),
        new_data_path=str(exchange.data_path),
    )


def migrate_request(
    plan: MigrationPlan, dataset: Dataset, exchange: Exchange
) -> ep.MigrateQueryRequest:
    return ep.MigrateQueryRequest(
        dataset_id=dataset.id,
        dataset_alias=dataset.alias,
        system_time=plan.system_time,
        vocab=plan.vocab,
        prev_transform=plan.prev_transform,
        new_transform=plan.new_transform,
        query_inputs=exchange.inputs,
        next_offset=0 if plan.prev_offset is None else plan.prev_offset + 1,
        prev_checkpoint_path=stored_checkpoint(dataset, plan.prev_checkpoint),
        new_checkpoint_path=str(exchange.checkpoint_path),
        new_data_path=str(exchange.data_path),
    )


def stored_checkpoint(dataset: Dataset, checkpoint: Multihash | None) -> str | None:
    """The path of a checkpoint the dataset recorded; it must still be stored."""
    if checkpoint is None:
        return None
    path = dataset.checkpoint_path(checkpoint)
    if not path.is_file():
        raise ReplayError(f"checkpoint {checkpoint} is not stored at {path}")
    return str(path)
