"""A dataset's records written out for tools outside ODF (``odf export``).

The records of every data slice, in offset order, as Parquet, CSV or NDJSON: one file, or a
directory of files of at most ``partition_size`` records each (``part-00000.csv``...), or a
stream (``export_to_stream``: standard output). A file or directory appears whole or not at
all: it is written next to its destination (missing parent directories are created, and
removed again on failure) and renamed into place at the end. An existing destination is
refused unless ``force``: a file is then replaced, and so is a directory of an earlier
partitioned export (only ``part-NNNNN.*`` files); any other directory is never replaced.
"""

from __future__ import annotations

import enum
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from common.odf.errors import ValidationError
from coordinator.dataset import CorruptDatasetError, Dataset
from coordinator.ingest.context import data_files
from coordinator.ingest.readers.stream import BATCH_ROWS
from coordinator.tempdirs import remove_tree


class ExportFormat(enum.Enum):
    PARQUET = "parquet"
    CSV = "csv"
    NDJSON = "ndjson"


@dataclass(frozen=True, slots=True)
class ExportTarget:
    """Where and how an export writes: ``output`` in ``fmt``, one file or a directory of parts
    of at most ``partition_size`` records; ``force``: replace an existing one."""

    fmt: ExportFormat
    output: Path
    partition_size: int | None = None
    force: bool = False


@dataclass(frozen=True, slots=True)
class Exported:
    path: Path
    files: int
    records: int


def export_dataset(dataset: Dataset, target: ExportTarget) -> Exported:
    """Write ``dataset``'s records to ``target.output`` (see the module doc)."""
    fmt, output, partition_size = target.fmt, target.output, target.partition_size
    if partition_size is not None and partition_size < 1:
        raise ValidationError("must be at least 1", path="--partition-size")
    _check_replaceable(output, force=target.force)
    schema = _schema(dataset)
    created = _make_parents(output.parent)
    partial = output.with_name(f".{output.name}.partial-{os.getpid()}")
    try:
        if partition_size is None:
            records = _write(fmt, partial, schema, _batches(dataset, schema))
            files = 1
        else:
            partial.mkdir()
            files = records = 0
            for part in _parts(_batches(dataset, schema), partition_size):
                name = f"part-{files:05d}.{fmt.value}"
                records += _write(fmt, partial / name, schema, iter(part))
                files += 1
        _put_in_place(partial, output)
    except BaseException:
        _remove(partial)
        for directory in reversed(created):
            try:
                directory.rmdir()
            except OSError:  # no longer empty: someone else's now
                break
        raise
    return Exported(output, files, records)


def export_to_stream(dataset: Dataset, fmt: ExportFormat, stream: BinaryIO) -> Exported:
    """Write ``dataset``'s records to ``stream`` (standard output) in one piece; Parquet
    too (its writer never seeks)."""
    schema = _schema(dataset)
    records = _write(fmt, stream, schema, _batches(dataset, schema))
    stream.flush()
    return Exported(Path("-"), 1, records)


def _schema(dataset: Dataset) -> pa.Schema:
    schema = dataset.state().arrow_schema()
    if schema is None:
        raise ValidationError(f"dataset {dataset.alias!r} has no schema yet: nothing to export")
    return schema


_PART = re.compile(r"part-\d{5}\.[a-z]+")


def _check_replaceable(output: Path, *, force: bool) -> None:
    if not (output.exists() or output.is_symlink()):
        return
    if not force:
        raise ValidationError("already exists (use --force to replace it)", path=str(output))
    if output.is_dir() and not output.is_symlink():
        others = [p.name for p in output.iterdir() if not _PART.fullmatch(p.name)]
        if others:
            raise ValidationError(
                f"is a directory holding {others[0]!r}, not an earlier partitioned export:"
                " --force replaces only files and directories of part-NNNNN files",
                path=str(output),
            )


def _make_parents(directory: Path) -> list[Path]:
    """Create ``directory`` and its missing parents; the ones created, outermost first."""
    missing = []
    while not directory.exists():
        missing.append(directory)
        if directory.parent == directory:
            break
        directory = directory.parent
    created: list[Path] = []
    for d in reversed(missing):
        try:
            d.mkdir()
        except FileExistsError:
            continue
        except OSError as e:
            for c in reversed(created):
                c.rmdir()
            raise ValidationError(
                f"cannot create the directory: {e.strerror}", path=str(d)
            ) from None
        created.append(d)
    if not directory.is_dir() and not missing:
        raise ValidationError("is not a directory", path=str(directory))
    return created


def _put_in_place(partial: Path, output: Path) -> None:
    """Rename ``partial`` to ``output``; an existing ``output`` (allowed by
    ``_check_replaceable``) is set aside first and removed once the new one is in place."""
    if not (output.exists() or output.is_symlink()):
        os.rename(partial, output)
        return
    if partial.is_file() and not output.is_dir():
        os.replace(partial, output)  # atomic
        return
    old = output.with_name(f".{output.name}.old-{os.getpid()}")
    os.rename(output, old)
    try:
        os.rename(partial, output)
    except BaseException:
        os.rename(old, output)
        raise
    _remove(old)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        remove_tree(path)
    else:
        path.unlink(missing_ok=True)


def _batches(dataset: Dataset, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Every slice in offset order, in the dataset's current schema (older slices lack the
    columns added since: they are NULL there)."""
    for path in data_files(dataset, dataset.head()):
        try:
            table = pq.read_table(path)
        except (pa.ArrowException, OSError) as e:
            reason = (str(e).splitlines() or [type(e).__name__])[0]
            reason = reason.replace(f"Could not open Parquet input source '{path}': ", "")
            raise CorruptDatasetError(
                f"{path}: a data file of {dataset.alias!r} cannot be read ({reason});"
                " `odf verify` checks the dataset"
            ) from None
        missing = [f for f in schema if f.name not in table.column_names]
        for f in missing:
            table = table.append_column(f.name, pa.nulls(table.num_rows, f.type))
        table = table.select(schema.names).cast(schema)
        yield from table.to_batches(max_chunksize=BATCH_ROWS)


def _parts(batches: Iterator[pa.RecordBatch], size: int) -> Iterator[list[pa.RecordBatch]]:
    """Batches regrouped into parts of exactly ``size`` records (the last may be shorter)."""
    part: list[pa.RecordBatch] = []
    count = 0
    for batch in batches:
        while batch.num_rows:
            take = min(size - count, batch.num_rows)
            part.append(batch.slice(0, take))
            batch = batch.slice(take)
            count += take
            if count == size:
                yield part
                part, count = [], 0
    if part:
        yield part


def _write(
    fmt: ExportFormat, sink: Path | BinaryIO, schema: pa.Schema, batches: Iterator[Any]
) -> int:
    """Write ``batches`` to ``sink`` (a new file, or an open binary stream); the records."""
    records = 0
    if fmt is ExportFormat.PARQUET:
        target = sink if isinstance(sink, Path) else pa.PythonFile(sink, mode="w")
        with pq.ParquetWriter(target, schema) as parquet:
            for batch in batches:
                parquet.write_batch(batch)
                records += batch.num_rows
    elif fmt is ExportFormat.CSV:
        with pacsv.CSVWriter(str(sink) if isinstance(sink, Path) else sink, schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
                records += batch.num_rows
    elif isinstance(sink, Path):
        with open(sink, "wb") as out:
            for batch in batches:
                records += _write_ndjson(out, batch)
    else:
        for batch in batches:
            records += _write_ndjson(sink, batch)
    return records


def _write_ndjson(out: BinaryIO, batch: pa.RecordBatch) -> int:
    lines = (json.dumps(row, default=_json_value, ensure_ascii=False) for row in batch.to_pylist())
    out.write("".join(f"{line}\n" for line in lines).encode())
    return int(batch.num_rows)


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")
