"""Split transactions: one row-local transformation answered as K slices (ExecuteSplitTransform).

Each input's ``data_paths`` are its blocks' files, oldest first. ``plan_slices`` groups them
into K runs of whole files by record count (fewer runs rather than runs below
``min_records_per_slice``); slice ``j`` takes run ``j`` of every input, in input order. Each
slice is then the ordinary ``TransformRequest`` restricted to its files (``slice_request``),
its output offsets continuing from the previous slice's, and may claim the watermark its
inputs' explicit watermarks give up to its last block: those from before the input's next
slice's first file (their system time before that file's first system time; each block's file
is written before its block is committed); the last slice gets them all, as ExecuteTransform
would. The engine writes and hashes every slice on the executors in one Spark job
(``split_job.py``) when ExecuteTransform would stream the slices' outputs; otherwise
``execute_split`` runs each slice through ExecuteTransform's path, one after the other, and
hashes its file on the driver (``common.hashing``). Both give the same bytes."""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

import pyarrow.parquet as pq

from common.arrow_values import time_bounds
from common.hashing.data_file import digest_data_file
from common.odf import engine_protocol as ep
from common.odf.fragments import OffsetInterval

SLICE_FILE = "slice-{:05d}.parquet"


@dataclasses.dataclass(frozen=True, slots=True)
class InputRun:
    """The files of one input that one slice reads."""

    paths: tuple[str, ...]
    interval: OffsetInterval | None
    watermarks_before: datetime | None
    """The system time of the input's next file after this run (``None``: no more files):
    the run's blocks' watermarks are those recorded before it."""


class SplitRefusal(Exception):
    """The request cannot be split (named reason); answered as InvalidQuery."""


def _file_records(path: str) -> int:
    return int(pq.ParquetFile(path).metadata.num_rows)


def column_bounds(path: str | Path, column: str) -> tuple[datetime | None, datetime | None]:
    """The least and greatest time in ``column`` of the Parquet file at ``path``, read from
    its records (``common.arrow_values.time_bounds``)."""
    return time_bounds(pq.read_table(path, columns=[column]).column(column))


def _min_system_time(path: str, column: str) -> datetime | None:
    return column_bounds(path, column)[0]


def plan_slices(request: ep.SplitTransformRequest, parallelism: int) -> list[list[InputRun]]:
    """Per slice, per input (in request order): the run of whole files it reads."""
    inputs = request.request.query_inputs
    counts = [[_file_records(p) for p in i.data_paths] for i in inputs]
    for i, c in zip(inputs, counts, strict=True):
        expected = (
            0 if i.offset_interval is None else i.offset_interval.end - i.offset_interval.start + 1
        )
        if sum(c) != expected:
            raise SplitRefusal(
                f"input {i.query_alias!r}: its files hold {sum(c)} records, its offset interval"
                f" {expected}: cannot cut it at block boundaries"
            )
    total = sum(sum(c) for c in counts)
    wanted = request.slices or parallelism
    k = max(1, min(wanted, total // max(1, request.min_records_per_slice)))
    runs: list[list[InputRun]] = [[] for _ in range(k)]
    for inp, c in zip(inputs, counts, strict=True):
        n = sum(c)
        groups: list[list[int]] = [[] for _ in range(k)]
        seen = 0
        for f, records in enumerate(c):
            # by the file's middle record: runs as even as whole files allow
            groups[min(k - 1, (2 * seen + records) * k // (2 * n)) if n else 0].append(f)
            seen += records
        offset = inp.offset_interval.start if inp.offset_interval is not None else 0
        consumed = 0
        for j, group in enumerate(groups):
            records = sum(c[f] for f in group)
            paths = tuple(inp.data_paths[f] for f in group)
            interval = OffsetInterval(start=offset, end=offset + records - 1) if records else None
            offset += records
            consumed += len(group)
            before = (
                _min_system_time(inp.data_paths[consumed], inp.vocab.system_time_column)
                if consumed < len(inp.data_paths)
                else None
            )
            runs[j].append(InputRun(paths, interval, before))
    return [r for r in runs if any(run.paths for run in r)] or [runs[0]]


def slice_request(
    request: ep.TransformRequest,
    runs: Sequence[InputRun],
    *,
    last: bool,
    next_offset: int,
    data_path: str,
    checkpoint_path: str,
) -> ep.TransformRequest:
    """The ordinary transform request of one slice."""
    inputs = []
    for inp, run in zip(request.query_inputs, runs, strict=True):
        marks = inp.explicit_watermarks
        if not last and run.watermarks_before is not None:
            bound = run.watermarks_before
            marks = tuple(w for w in marks if w.system_time < bound)
        inputs.append(
            dataclasses.replace(
                inp, data_paths=run.paths, offset_interval=run.interval, explicit_watermarks=marks
            )
        )
    return dataclasses.replace(
        request,
        query_inputs=tuple(inputs),
        next_offset=next_offset,
        new_data_path=data_path,
        new_checkpoint_path=checkpoint_path,
    )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SliceFacts:
    """What a slice's file holds, as its writer hashed it (no file without records); named
    as ``SplitSlice`` names them."""

    num_records: int
    size: int = 0
    physical_hash: str | None = None
    logical_hash: str | None = None
    min_event_time: datetime | None = None
    max_event_time: datetime | None = None

    @classmethod
    def of_file(cls, path: str | Path, event_time_column: str) -> SliceFacts:
        """The facts of the slice file at ``path``: hashes and size (``common.hashing``), and
        its records' event-time bounds."""
        digest = digest_data_file(Path(path))
        low, high = column_bounds(path, event_time_column)
        return cls(
            num_records=digest.records,
            size=digest.size,
            physical_hash=digest.physical_hash.to_multibase(),
            logical_hash=digest.logical_hash.to_multibase(),
            min_event_time=low,
            max_event_time=high,
        )


def slice_path(request: ep.SplitTransformRequest, j: int) -> Path:
    return Path(request.slices_dir) / SLICE_FILE.format(j)


def run_records(runs: Sequence[InputRun]) -> int:
    """The input records a slice reads."""
    return sum(0 if r.interval is None else r.interval.end - r.interval.start + 1 for r in runs)


def split_slice(
    request: ep.SplitTransformRequest,
    runs: Sequence[InputRun],
    *,
    path: Path,
    next_offset: int,
    facts: SliceFacts,
    watermark: datetime | None,
) -> ep.SplitSlice:
    """The answer for one slice: its inputs' runs, and its file unless it has no records."""
    inputs = tuple(
        ep.SplitSliceInput(query_alias=i.query_alias, offset_interval=r.interval)
        for i, r in zip(request.request.query_inputs, runs, strict=True)
    )
    if not facts.num_records:
        return ep.SplitSlice(inputs=inputs, new_watermark=watermark)
    interval = OffsetInterval(start=next_offset, end=next_offset + facts.num_records - 1)
    return ep.SplitSlice(
        data_path=str(path),
        offset_interval=interval,
        inputs=inputs,
        new_watermark=watermark,
        **dataclasses.asdict(facts),
    )


def execute_split(
    request: ep.SplitTransformRequest,
    plan: Sequence[Sequence[InputRun]],
    transform: Callable[[ep.TransformRequest], ep.TransformResponseSuccess],
) -> ep.SplitTransformResponseSuccess:
    """Run each slice of ``plan`` through ``transform`` (ExecuteTransform's path), one after
    the other, and hash its file here."""
    next_offset = request.request.next_offset
    answers = []
    with tempfile.TemporaryDirectory(prefix="odf-split-") as scratch:
        for j, runs in enumerate(plan):
            path = slice_path(request, j)
            answer = transform(
                slice_request(
                    request.request,
                    runs,
                    last=j == len(plan) - 1,
                    next_offset=next_offset,
                    data_path=str(path),
                    checkpoint_path=str(Path(scratch) / f"checkpoint-{j}"),
                )
            )
            if answer.new_offset_interval is None:
                path.unlink(missing_ok=True)
                facts = SliceFacts(num_records=0)
            else:
                facts = SliceFacts.of_file(path, request.request.vocab.event_time_column)
            answers.append(
                split_slice(
                    request,
                    runs,
                    path=path,
                    next_offset=next_offset,
                    facts=facts,
                    watermark=answer.new_watermark,
                )
            )
            next_offset += facts.num_records
    return ep.SplitTransformResponseSuccess(slices=tuple(answers))
