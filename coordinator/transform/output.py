"""What the engine wrote for a transaction: contract checks, hashes, and the events to commit.

The engine contract (as the reference coordinator enforces it): a data file exactly when the
response has an output interval, a single regular file, starting at the requested next
offset, with as many records as the interval says; a checkpoint, if any, is one regular file.
The data gets its logical hash (``arrow0-sha3-256`` over the records) and physical hash
(SHA3-256 of the bytes), record count and schema from one memory-mapped read
(``digest_data_file``), the checkpoint its physical hash. The commit trusts these hashes
(``CommitItem.hashed``): the files are not read again. Files to be committed are flushed to
the disk while they are hashed, so the commit's fsync of them finds nothing left to write.

The events: a ``SetDataSchema`` first when the output schema is new (the first data) or has
gained columns, then the ``ExecuteTransform`` with the inputs' progress (RFC-014). Both are
committed together, so a schema never appears without its data.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from common.hashing import digest_data_file, physical_hash_file
from common.odf import engine_protocol as ep
from common.odf.errors import DecodeError
from common.odf.events import ExecuteTransform, SetDataSchema
from common.odf.fragments import Checkpoint, DataSlice
from common.serde.arrow_schema import decode_arrow_schema, encode_arrow_schema
from coordinator.dataset import CommitItem, durable
from coordinator.dataset.rules import schema_change_problem
from coordinator.engine.errors import EngineContractError
from coordinator.transform.errors import OutputSchemaError
from coordinator.transform.plan import TransformPlan


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineOutput:
    """The checked and hashed result of one engine call."""

    data_file: Path | None
    new_data: DataSlice | None
    schema: pa.Schema | None
    checkpoint_file: Path | None
    new_checkpoint: Checkpoint | None


def collect_output(
    response: ep.TransformResponseSuccess,
    plan: TransformPlan,
    data: Path,
    checkpoint: Path,
    *,
    flush: bool = False,
) -> EngineOutput:
    """Check the engine's files against its response and the contract, and hash them.

    ``flush``: the files are to be committed; they are written to the disk (``fsync``) in a
    second thread while they are read for their hashes, so the commit does not wait for it.
    """
    with ThreadPoolExecutor(1) as pool:
        flushed = pool.submit(_flush, [data, checkpoint] if flush else [])
        output = _checked_output(response, plan, data, checkpoint)
        flushed.result()
    return output


def _flush(paths: list[Path]) -> None:
    for path in paths:
        if path.is_file() and not path.is_symlink():
            durable.flush(path)


def _checked_output(
    response: ep.TransformResponseSuccess, plan: TransformPlan, data: Path, checkpoint: Path
) -> EngineOutput:
    interval = response.new_offset_interval
    data_exists = _exists(data, "data")
    if interval is None and data_exists:
        raise EngineContractError("the engine wrote a data file while the output slice is empty")
    if interval is not None and not data_exists:
        raise EngineContractError(
            f"the engine reported output offsets {interval.start}..{interval.end} but wrote no"
            " data file"
        )
    new_data, schema = None, None
    if interval is not None:
        if interval.start != plan.next_offset or interval.end < interval.start:
            raise EngineContractError(
                f"the engine's output offsets {interval.start}..{interval.end} do not start at"
                f" the next offset {plan.next_offset}"
            )
        try:
            digest = digest_data_file(data)
        except DecodeError as e:
            raise EngineContractError(f"the engine's data file is not readable: {e}") from None
        rows = digest.records
        if rows != interval.end - interval.start + 1:
            raise EngineContractError(
                f"the engine's data file has {rows} records, its output offsets"
                f" {interval.start}..{interval.end} say {interval.end - interval.start + 1}"
            )
        schema = digest.schema
        new_data = DataSlice(
            logical_hash=digest.logical_hash,
            physical_hash=digest.physical_hash,
            offset_interval=interval,
            size=digest.size,
        )
    new_checkpoint = None
    if _exists(checkpoint, "checkpoint"):
        new_checkpoint = Checkpoint(
            physical_hash=physical_hash_file(checkpoint), size=checkpoint.stat().st_size
        )
    return EngineOutput(
        data_file=data if new_data else None,
        new_data=new_data,
        schema=schema,
        checkpoint_file=checkpoint if new_checkpoint else None,
        new_checkpoint=new_checkpoint,
    )


def _exists(path: Path, what: str) -> bool:
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise EngineContractError(f"the engine's {what} output {path} is not a regular file")
    return path.is_file()


def commit_items(
    plan: TransformPlan, output: EngineOutput, response: ep.TransformResponseSuccess
) -> list[CommitItem]:
    """The events of the transaction, with the staged files they name."""
    items = []
    schema_event = _schema_event(plan.output_schema, output.schema)
    if schema_event is not None:
        items.append(CommitItem(schema_event))
    watermark = response.new_watermark
    if watermark is None:
        watermark = plan.prev_watermark  # an engine that returns none keeps the last one
    event = ExecuteTransform(
        query_inputs=plan.query_inputs(),
        prev_checkpoint=plan.prev_checkpoint,
        prev_offset=plan.prev_offset,
        new_data=output.new_data,
        new_checkpoint=output.new_checkpoint,
        new_watermark=watermark,
    )
    items.append(CommitItem(event, output.data_file, output.checkpoint_file, hashed=True))
    return items


def _schema_event(current: bytes | None, output: pa.Schema | None) -> SetDataSchema | None:
    if output is None:
        return None
    if current is None:
        return SetDataSchema(schema=encode_arrow_schema(output))
    old = decode_arrow_schema(current)
    if same_columns(old, output):
        return None
    problem = schema_change_problem(old, output)
    if problem is not None:
        raise OutputSchemaError(f"the transformation's output schema changed: {problem}")
    return SetDataSchema(schema=encode_arrow_schema(output))


def same_columns(a: pa.Schema, b: pa.Schema) -> bool:
    """Same column names and types in the same order (nullability and metadata aside)."""
    return len(a) == len(b) and all(
        x.name == y.name and x.type.equals(y.type) for x, y in zip(a, b, strict=True)
    )
