"""Split transactions: one planned transaction committed as K ordinary ExecuteTransform blocks.

For a row-local query (ValidateQuery's ``row_local``) over a large backlog, the engine's
executors write the output as K slices, each one Parquet file with its hashes
(ExecuteSplitTransform, our protocol extension). The engine is untrusted at this edge too, so
``check_slices`` accepts the answer only when:

- the slices' output offsets are contiguous from the plan's next offset, and each slice's
  record count matches its interval;
- per input, the slices' input intervals are contiguous, cover exactly the planned interval
  and end at input block boundaries (``_at_block_end``);
- every file lies inside the slices directory, is a regular file of the stated size, has the
  stated record count (its Parquet footer) and the dataset's columns;
- the files chosen for a re-hash (all of them with ``rehash`` 1.0, else a random subset chosen
  here, not by the engine) have the stated physical and logical hashes;
- the slices' watermarks never go back, and none passes the last slice's (the transaction's):
  a slice claims what its own input blocks allow, so that it replays on its own.

Anything else is an ``EngineContractError`` naming the slice and the field; nothing is
committed. ``slice_events`` then turns the checked slices into the K ``ExecuteTransform``
events, each of whose ``queryInputs`` names the input blocks its slice consumed, whole: each
block is an ordinary ODF transaction that any coordinator replays on its own, and the last
slice ends where the plan ends, so the next transaction is planned as after an unsplit one.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol, runtime_checkable

from common.logs import get_logger
from common.odf import engine_protocol as ep
from common.odf.errors import DecodeError
from common.odf.events import ExecuteTransform, SetDataSchema
from common.odf.fragments import DataSlice, ExecuteTransformInput, OffsetInterval, TransformSql
from common.odf.multihash import Multihash
from coordinator.config import SplitConfig
from coordinator.dataset import CommitItem, Dataset
from coordinator.engine.errors import EngineContractError, EngineUnimplementedError
from coordinator.transform.plan import InputPlan, TransformPlan

log = get_logger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckedSlice:
    """One slice of the engine's answer, checked against the plan."""

    data_file: Path | None
    new_data: DataSlice | None
    inputs: tuple[OffsetInterval | None, ...]
    """Per planned input, in order: the input records the slice consumed."""
    new_watermark: datetime | None
    event_times: tuple[datetime, datetime] | None = None
    """The least and greatest event time of its records, as the engine computed them where
    the file was written (``None``: no records, or an engine that does not say)."""


def sample_size(files: int, rehash: float) -> int:
    """How many of ``files`` files a re-hash fraction ``rehash`` re-hashes (at least one)."""
    if files == 0:
        return 0
    return files if rehash >= 1.0 else min(files, max(1, math.ceil(files * rehash)))


def check_slices(
    answer: ep.SplitTransformResponseSuccess,
    plan: TransformPlan,
    slices_dir: Path,
    *,
    rehash: float,
    schema: bytes | None,
    rng: random.Random | None = None,
) -> list[CheckedSlice]:
    """The engine's slices, checked as the module doc says. ``schema``: the dataset's Arrow
    schema (``None`` before its first data: the slices must then agree among themselves)."""
    slices = answer.slices
    if not slices:
        raise EngineContractError("the engine's split answer has no slices")
    root = slices_dir.resolve()
    checked = []
    next_offset = plan.next_offset
    cursors = [_start(i) for i in plan.inputs]
    claimed = plan.prev_watermark
    for n, s in enumerate(slices):
        where = f"slice {n + 1} of {len(slices)}"
        new_data, path = _output(s, where, next_offset, root, len(slices))
        if new_data is not None:
            next_offset = new_data.offset_interval.end + 1
        intervals = _inputs(s, where, plan.inputs, cursors, final=n == len(slices) - 1)
        if s.new_watermark is not None:
            claimed = _claimed(s.new_watermark, claimed, slices[-1].new_watermark, where)
        checked.append(
            CheckedSlice(
                data_file=path,
                new_data=new_data,
                inputs=intervals,
                new_watermark=s.new_watermark,
                event_times=_event_times(s, where),
            )
        )
    for plan_input, cursor in zip(plan.inputs, cursors, strict=True):
        planned = plan_input.offset_interval
        end = planned.end + 1 if planned is not None else None
        if cursor != end:
            raise EngineContractError(
                f"input {plan_input.query_alias!r}: the slices consumed its records up to"
                f" offset {_last(cursor)}, the transaction planned up to {_last(end)}"
            )
    _check_files(checked, schema, plan.vocab.event_time_column, rehash, rng or random.Random())
    return checked


def _event_times(s: ep.SplitSlice, where: str) -> tuple[datetime, datetime] | None:
    """The slice's event-time bounds: both or neither, only with records, least first."""
    low, high = s.min_event_time, s.max_event_time
    if low is None and high is None:
        return None
    if low is None or high is None or s.data_path is None or low > high:
        raise EngineContractError(
            f"{where}: minEventTime {_iso(low)} and maxEventTime {_iso(high)} are not the"
            " bounds of a slice with records"
        )
    return low, high


def _iso(value: datetime | None) -> str:
    return "none" if value is None else value.isoformat()


def event_time_range(slices: Sequence[CheckedSlice]) -> tuple[datetime, datetime] | None:
    """The event-time bounds of the slices' records together (``None`` when a slice with
    records does not say)."""
    bounds = [s.event_times for s in slices if s.new_data is not None]
    if not bounds or any(b is None for b in bounds):
        return None
    known = [b for b in bounds if b is not None]
    return min(b[0] for b in known), max(b[1] for b in known)


def _claimed(
    watermark: datetime, before: datetime | None, final: datetime | None, where: str
) -> datetime:
    """A slice's watermark: not before the one claimed so far, not after the transaction's
    (the last slice's)."""
    if before is not None and watermark < before:
        raise EngineContractError(
            f"{where}: newWatermark {watermark.isoformat()} is before {before.isoformat()}"
        )
    if final is None or watermark > final:
        raise EngineContractError(
            f"{where}: newWatermark {watermark.isoformat()} is beyond the last slice's: only"
            " the last slice may claim the transaction's watermark"
        )
    return watermark


def _start(plan: InputPlan) -> int | None:
    interval = plan.offset_interval
    return None if interval is None else interval.start


def _last(cursor: int | None) -> str:
    return "none" if cursor is None else str(cursor - 1)


def _output(
    s: ep.SplitSlice, where: str, next_offset: int, root: Path, count: int
) -> tuple[DataSlice | None, Path | None]:
    """The slice's output interval and file, checked (the file's contents come later)."""
    interval = s.offset_interval
    if s.data_path is None:
        if interval is not None or s.num_records:
            raise EngineContractError(f"{where}: offsetInterval or numRecords without a data file")
        if count != 1:
            raise EngineContractError(f"{where}: empty (only a transaction's one slice may be)")
        return None, None
    if interval is None:
        raise EngineContractError(f"{where}: dataPath without an offsetInterval")
    if interval.start != next_offset or interval.end < interval.start:
        raise EngineContractError(
            f"{where}: offsetInterval {interval.start}..{interval.end} does not start at the"
            f" next offset {next_offset}"
        )
    if s.num_records != interval.end - interval.start + 1:
        raise EngineContractError(
            f"{where}: numRecords {s.num_records} does not match offsetInterval"
            f" {interval.start}..{interval.end}"
        )
    path = _inside(Path(s.data_path), root, where)
    if s.logical_hash is None or s.physical_hash is None:
        raise EngineContractError(f"{where}: a data file without its logicalHash or physicalHash")
    try:
        new_data = DataSlice(
            logical_hash=Multihash.from_multibase(s.logical_hash),
            physical_hash=Multihash.from_multibase(s.physical_hash),
            offset_interval=interval,
            size=s.size,
        )
    except (DecodeError, ValueError) as e:
        raise EngineContractError(f"{where}: a hash is not a multibase multihash: {e}") from None
    return new_data, path


def _inside(path: Path, root: Path, where: str) -> Path:
    """``path``, a regular file inside ``root`` (no symbolic link anywhere on the way)."""
    if not path.is_absolute() or ".." in path.parts:
        raise EngineContractError(f"{where}: dataPath {str(path)!r} is not an absolute path")
    if path.is_symlink() or not path.resolve().is_relative_to(root):
        raise EngineContractError(
            f"{where}: dataPath {str(path)!r} is outside the slices directory {root}"
        )
    if not path.is_file():
        raise EngineContractError(f"{where}: dataPath {str(path)!r} is not a regular file")
    return path


def _inputs(
    s: ep.SplitSlice,
    where: str,
    planned: Sequence[InputPlan],
    cursors: list[int | None],
    *,
    final: bool,
) -> tuple[OffsetInterval | None, ...]:
    """The slice's input intervals, each continuing where the previous slice's ended."""
    if len(s.inputs) != len(planned):
        raise EngineContractError(
            f"{where}: {len(s.inputs)} inputs, the transaction has {len(planned)}"
        )
    found = []
    for j, (entry, plan) in enumerate(zip(s.inputs, planned, strict=True)):
        if entry.query_alias != plan.query_alias:
            raise EngineContractError(
                f"{where}: input {j + 1} is {entry.query_alias!r}, expected {plan.query_alias!r}"
            )
        interval = entry.offset_interval
        if interval is not None:
            planned_end = plan.offset_interval.end if plan.offset_interval else None
            if (
                cursors[j] is None
                or interval.start != cursors[j]
                or interval.end < interval.start
                or planned_end is None
                or interval.end > planned_end
            ):
                raise EngineContractError(
                    f"{where}: input {entry.query_alias!r} offsetInterval"
                    f" {interval.start}..{interval.end} does not continue at offset"
                    f" {_first(cursors[j])} within the planned records"
                )
            _at_block_end(plan, interval, final, where)
            cursors[j] = interval.end + 1
        found.append(interval)
    return tuple(found)


def _at_block_end(plan: InputPlan, interval: OffsetInterval, final: bool, where: str) -> None:
    """A slice ends at the last record of an input block: its ``queryInputs`` entry is then
    that of an ordinary transaction (``newOffset`` the input's last offset as of
    ``newBlockHash``), which every coordinator replays on its own. The ODF chain rules have
    no way to say that a slice starts or ends inside a block (``newBlockHash`` equal to
    ``prevBlockHash`` is an empty block interval), so the engine cuts at input files."""
    if final or any(f.file_interval.end == interval.end for f in plan.files):
        return
    raise EngineContractError(
        f"{where}: input {plan.query_alias!r} offsetInterval {interval.start}..{interval.end}"
        " ends inside an input block: slices must end at an input block's last record"
    )


def _first(cursor: int | None) -> str:
    return "none" if cursor is None else str(cursor)


def _check_files(
    slices: Sequence[CheckedSlice],
    schema: bytes | None,
    event_time_column: str,
    rehash: float,
    rng: random.Random,
) -> None:
    """Sizes, record counts and columns of every file; hashes and event-time bounds of a
    sample (``rehash``)."""
    import pyarrow.parquet as pq

    from common.hashing import digest_data_file
    from common.serde.arrow_schema import decode_arrow_schema
    from coordinator.transform.output import same_columns

    with_data = [(n, s) for n, s in enumerate(slices) if s.data_file and s.new_data]
    expected = decode_arrow_schema(schema) if schema is not None else None
    for n, s in with_data:
        assert s.data_file is not None and s.new_data is not None
        where = f"slice {n + 1} of {len(slices)}"
        size = s.data_file.stat().st_size
        if size != s.new_data.size:
            raise EngineContractError(f"{where}: size {s.new_data.size}, the file has {size} bytes")
        try:
            meta = pq.read_metadata(s.data_file)
        except (OSError, ValueError) as e:
            raise EngineContractError(f"{where}: the data file is not Parquet: {e}") from None
        o = s.new_data.offset_interval
        if meta.num_rows != o.end - o.start + 1:
            raise EngineContractError(
                f"{where}: the file has {meta.num_rows} records, numRecords says"
                f" {o.end - o.start + 1}"
            )
        columns = meta.schema.to_arrow_schema()
        if expected is None:
            expected = columns
        elif not same_columns(expected, columns):
            raise EngineContractError(f"{where}: its columns differ from the dataset's schema")
    for n, s in sorted(rng.sample(with_data, sample_size(len(with_data), rehash))):
        assert s.data_file is not None and s.new_data is not None
        where = f"slice {n + 1} of {len(slices)}"
        try:
            digest = digest_data_file(s.data_file)
        except DecodeError as e:
            raise EngineContractError(f"{where}: the data file is not readable: {e}") from None
        if digest.physical_hash != s.new_data.physical_hash:
            raise EngineContractError(
                f"{where}: physicalHash {s.new_data.physical_hash}, the file hashes to"
                f" {digest.physical_hash}"
            )
        if digest.logical_hash != s.new_data.logical_hash:
            raise EngineContractError(
                f"{where}: logicalHash {s.new_data.logical_hash}, the records hash to"
                f" {digest.logical_hash}"
            )
        _check_event_times(s, where, event_time_column)


def _check_event_times(s: CheckedSlice, where: str, column: str) -> None:
    """The engine's event-time bounds of a re-hashed file against its records."""
    import pyarrow.parquet as pq

    from common.arrow_values import time_bounds

    if s.event_times is None or s.data_file is None:
        return
    try:
        found = time_bounds(pq.read_table(s.data_file, columns=[column]).column(column))
    except (OSError, ValueError, KeyError) as e:
        raise EngineContractError(f"{where}: cannot read its {column!r} column: {e}") from None
    if found != s.event_times:
        low, high = s.event_times
        raise EngineContractError(
            f"{where}: event times {low.isoformat()}..{high.isoformat()}, its records have"
            f" {_iso(found[0])}..{_iso(found[1])}"
        )


def slice_events(plan: TransformPlan, slices: Sequence[CheckedSlice]) -> list[ExecuteTransform]:
    """The K ``ExecuteTransform`` events of the checked slices (module doc)."""
    events = []
    prev_offset = plan.prev_offset
    entries = [i.execute_transform_input() for i in plan.inputs]
    last_block = [i.prev_block_hash for i in plan.inputs]
    last_offset = [i.prev_offset for i in plan.inputs]
    watermark = plan.prev_watermark
    for n, s in enumerate(slices):
        final = n == len(slices) - 1
        query_inputs = []
        for j, (plan_input, interval) in enumerate(zip(plan.inputs, s.inputs, strict=True)):
            if final:
                new_block, new_offset = entries[j].new_block_hash, entries[j].new_offset
                if interval is None:
                    new_offset = None
            elif interval is None:
                new_block, new_offset = None, None
            else:
                new_block, new_offset = _block_of(plan_input, interval.end), interval.end
            query_inputs.append(
                ExecuteTransformInput(
                    dataset_id=plan_input.dataset_id,
                    prev_block_hash=last_block[j],
                    new_block_hash=new_block,
                    prev_offset=last_offset[j],
                    new_offset=new_offset,
                )
            )
            if new_block is not None:
                last_block[j] = new_block
            if new_offset is not None:
                last_offset[j] = new_offset
        if s.new_watermark is not None:
            watermark = s.new_watermark
        events.append(
            ExecuteTransform(
                query_inputs=tuple(query_inputs),
                prev_checkpoint=plan.prev_checkpoint,
                prev_offset=prev_offset,
                new_data=s.new_data,
                new_checkpoint=None,
                new_watermark=watermark,
            )
        )
        if s.new_data is not None:
            prev_offset = s.new_data.offset_interval.end
    return events


def _block_of(plan: InputPlan, offset: int) -> Multihash:
    """The block of ``plan``'s input whose data holds ``offset``."""
    for f in plan.files:
        if f.file_interval.start <= offset <= f.file_interval.end and f.block is not None:
            return f.block
    raise EngineContractError(f"input {plan.query_alias!r}: no planned block holds offset {offset}")


# --- running a split transaction -----------------------------------------------------------------


@runtime_checkable
class SplitEngine(Protocol):
    """An engine client that can be asked for a split transaction (ExecuteSplitTransform)."""

    description: str

    def validate_query(
        self, request: ep.ValidateQueryRequest
    ) -> ep.ValidateQueryResponseSuccess: ...

    def execute_split_transform(
        self, request: ep.SplitTransformRequest
    ) -> ep.SplitTransformResponseSuccess: ...


SLICES_DIR = "slices"
MIN_RECORDS_PER_SLICE = 1_000_000
"""What the coordinator asks of each slice: fewer slices rather than smaller ones (each is a
block with fixed costs: an event, a file, a replay)."""


class Splitter:
    """Decides which transactions are split, runs and commits them (one per ``Transformer``).

    ValidateQuery's ``row_local`` is asked once per dataset, query and input schemas; an
    engine that does not implement ExecuteSplitTransform (or cannot be asked at all) is
    remembered and never asked again: its transactions run unsplit.
    """

    def __init__(self, config: SplitConfig) -> None:
        self.config = config
        self._row_local: dict[tuple[str, TransformSql, tuple[bytes, ...]], bool] = {}
        self._unsupported: set[str] = set()

    def wants(self, plan: TransformPlan, dataset: Dataset, engine: object) -> bool:
        """Whether ``plan`` is to be split on ``engine`` (asks ValidateQuery the first time)."""
        if plan.num_input_records < self.config.min_records or plan.prev_checkpoint is not None:
            return False
        if not isinstance(engine, SplitEngine) or engine.description in self._unsupported:
            return False
        key = (
            dataset.id.to_did(),
            plan.transform,
            tuple(i.schema for i in plan.inputs),
        )
        if key not in self._row_local:
            try:
                answer = engine.validate_query(plan.validate_request(dataset.alias))
            except EngineUnimplementedError:  # a reference engine: no extensions at all
                self._unsupported.add(engine.description)
                return False
            self._row_local[key] = answer.row_local
        return self._row_local[key]

    def run(
        self,
        plan: TransformPlan,
        request: ep.TransformRequest,
        engine: SplitEngine,
        area: Path,
    ) -> list[CheckedSlice] | None:
        """The engine's checked slices, written under ``area``; ``None``: the engine has no
        ExecuteSplitTransform (remembered), run the transaction unsplit."""
        slices_dir = area / SLICES_DIR
        slices_dir.mkdir()
        split = ep.SplitTransformRequest(
            request=request,
            slices=self.config.slices,
            min_records_per_slice=min(MIN_RECORDS_PER_SLICE, self.config.min_records),
            slices_dir=str(slices_dir),
        )
        try:
            answer = engine.execute_split_transform(split)
        except EngineUnimplementedError:
            self._unsupported.add(engine.description)
            log.info("transform.split_unsupported", engine=engine.description)
            return None
        return check_slices(
            answer, plan, slices_dir, rehash=self.config.rehash, schema=plan.output_schema
        )


def split_items(
    plan: TransformPlan, slices: Sequence[CheckedSlice], staged: Sequence[Path | None]
) -> list[CommitItem]:
    """The events to commit in one head move: a ``SetDataSchema`` when the slices bring the
    dataset's first schema, then the K ``ExecuteTransform`` with their staged files."""
    items = []
    first = next((p for p in staged if p is not None), None)
    if plan.output_schema is None and first is not None:
        import pyarrow.parquet as pq

        from common.serde.arrow_schema import encode_arrow_schema

        schema = pq.read_schema(first).remove_metadata()
        items.append(CommitItem(SetDataSchema(schema=encode_arrow_schema(schema))))
    for event, path in zip(slice_events(plan, slices), staged, strict=True):
        items.append(CommitItem(event, path, hashed=True))
    return items
