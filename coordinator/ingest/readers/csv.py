"""ReadStep::Csv over ``pyarrow.csv.open_csv``, streamed block by block.

With a DDL schema and ``header: true`` the header's names are matched to the schema's, by
name (exactly, else ignoring case and surrounding spaces): columns in another order are read
in the header's order and put in the schema's; a header that is not a permutation of the
schema's names stops the ingest with an error naming the file, line, expected and found
columns. ``columns_by_position`` (the workspace's ``ingest.csvColumnsByPosition``) keeps the
reference's semantics instead: columns by position, the header line only skipped. Without a
header the columns are by position. Without a schema the names come from the header (or
``column_1``, ...) and the types are inferred (``inferSchema``) or all strings.

An empty field is NULL for every type, and so is ``nullValue`` when set (the reference
rejects any ``nullValue`` but ``""``). Booleans are case-insensitive ``true``/``false``. No
escape character: quotes are doubled. A bad row stops the whole ingest with an error naming
the file, line and column.

A file larger than a segment is parsed in parallel, segment by segment (``csv_segments``),
up to its first quote character, and streamed from there. The types are fixed before the
segments are parsed (the DDL schema, or the types inferred from the first block, as the
streaming reader does), so every segment is converted as the streaming reader would have.
A DDL schema's TIMESTAMP and DATE columns are parsed by the CSV converter itself where it
agrees with the reference's rules (RFC 3339 with a zone, years 1 to 9999); a segment with any
other time text is read again with those columns as text, parsed by ``temporal``.
"""

from __future__ import annotations

import csv as pycsv
import itertools
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv

from common.odf.fragments import ReadStepCsv
from coordinator.ingest.ddl import parse_read_schema
from coordinator.ingest.errors import ReadError, UnsupportedOptionError
from coordinator.ingest.lane import ordered_map
from coordinator.ingest.memory_pool import pipeline_pool
from coordinator.ingest.readers.csv_segments import SEGMENT_BYTES, Segment, SegmentCutter
from coordinator.ingest.readers.stream import DataStream, read_batches
from coordinator.ingest.readers.temporal import conform_batch, first_out_of_range, is_temporal

BLOCK_SIZE = 1 << 20
"""Bytes of CSV text per batch: large enough to amortise per-batch work, small to stream.
Larger blocks make pyarrow's streaming reader hold more the longer the file (measured: its
allocations peak at 219 MiB on 4M rows and 305 MiB on 8M with 8 MiB blocks, flat at 38 MiB
with 1 MiB blocks), so the peak memory of an ingest would grow with the file."""

PARSERS = min(os.cpu_count() or 1, 8)
"""Threads that parse segments: one per core (each ``read_csv`` of a segment is one thread)."""


def _casings(word: str) -> list[str]:
    pairs = [(c.lower(), c.upper()) for c in word]
    return ["".join(p) for p in itertools.product(*pairs)]


_TRUE = _casings("true")
_FALSE = _casings("false")
_CONVERSION_ERROR = re.compile(
    r"In CSV column #(\d+): CSV conversion error to ([^:]+): invalid value '(.*)'$", re.S
)
_ROW_NUMBER = re.compile(r"Row #\d+: ")
"""pyarrow's row number in an error: counted within a segment, so dropped (the line is found
by re-reading the file)."""
_FIELD_COUNT_ERROR = re.compile(r"Expected (\d+) columns, got (\d+): (.*)$", re.S)


def read_csv(
    step: ReadStepCsv,
    path: Path,
    *,
    name: str,
    columns_by_position: bool = False,
    block_size: int = BLOCK_SIZE,
    segment_size: int = SEGMENT_BYTES,
) -> DataStream:
    """The records of the CSV file at ``path``; ``name`` is what errors call the file.
    ``columns_by_position``: a header is skipped, not matched (see the module doc).
    ``block_size``: bytes per block of the streaming reader; ``segment_size``: bytes per
    segment parsed in parallel (a file of at most one segment is streamed)."""
    reader = _CsvReader(step, path, name, block_size, segment_size)
    reader.by_position = columns_by_position
    return reader.open()


class _CsvReader:
    def __init__(
        self, step: ReadStepCsv, path: Path, name: str, block_size: int, segment_size: int
    ) -> None:
        self.step = step
        self.path = path
        self.name = name
        self.block_size = block_size
        self.segment_size = segment_size
        self.direct_time = True
        """Whether segments still try the CSV converter on time columns (see the module)."""
        self.separator, self.quote = check_csv_options(step)
        # The reference accepts only "", but the spec defines nullValue: we honour it. An
        # empty field stays NULL too, as in the reference.
        self.null_values = sorted({"", step.null_value or ""})
        self.schema = parse_read_schema(step.schema) if step.schema else None
        self.header = bool(step.header)
        self.by_position = False
        self.names: list[str] = []

    def open(self) -> DataStream:
        if self.schema is not None:
            in_file = self.schema
            if self.header and not self.by_position:
                in_file = self._header_order(self.schema)
            self.names = in_file.names
            read_options = self._read_options(column_names=self.names, skip_rows=int(self.header))
            types = {f.name: pa.string() if is_temporal(f.type) else f.type for f in in_file}
            reader = self._open(read_options, types)
            direct = {f.name: f.type for f in in_file}
            batches = self._all_batches(reader, types, direct)
            if in_file is not self.schema:
                batches = (b.select(self.schema.names) for b in batches)
            return DataStream(self.schema, self._typed_batches(batches, self.schema))
        read_options = self._read_options(autogenerate=not self.header)
        reader = self._open(read_options, {})
        self.names = self._output_names(reader.schema.names)
        if not self.step.infer_schema:
            reader.close()
            generated = reader.schema.names
            reader = self._open(read_options, dict.fromkeys(generated, pa.string()))
        schema = pa.schema(
            [pa.field(n, f.type) for n, f in zip(self.names, reader.schema, strict=True)]
        )
        types = {f.name: f.type for f in reader.schema}
        return DataStream(schema, self._renamed_batches(self._all_batches(reader, types), schema))

    def _header_order(self, schema: pa.Schema) -> pa.Schema:
        """The schema's fields in the order the file's header names them; an error naming
        the line, the expected and the found columns when the header is not a permutation
        of the schema's names."""
        found = self._header()
        if found is None:
            return schema  # no records at all: the reader reports an empty file
        line, header = found
        fields = {f.name: f for f in schema}
        folded: dict[str, list[str]] = {}
        for f in schema:
            folded.setdefault(f.name.strip().lower(), []).append(f.name)
        matched: list[str | None] = []
        for column in header:
            name = column if column in fields else None
            if name is None:
                candidates = folded.get(column.strip().lower(), [])
                name = candidates[0] if len(candidates) == 1 else None
            matched.append(name)
        names = [n for n in matched if n is not None]
        if len(names) == len(header) == len(schema) and sorted(names) == sorted(schema.names):
            return pa.schema([fields[n] for n in names], metadata=schema.metadata)
        raise ReadError(
            f"the header's columns {_listed(header)} do not match the schema's"
            f" {_listed(schema.names)} ({_difference(header, matched, schema.names)}); columns"
            " are matched by name, in any order (`odf config set ingest.csvColumnsByPosition"
            " NAME` reads them by position, skipping the header)",
            path=f"{self.name}:{line}",
        )

    def _header(self) -> tuple[int, list[str]] | None:
        """(line number, names) of the file's header record; None when it has none."""
        with open(self.path, newline="", encoding="utf-8-sig", errors="replace") as f:
            reader = pycsv.reader(
                f, delimiter=self.separator, quotechar=self.quote, doublequote=True
            )
            for row in reader:
                if row and row != [""]:
                    return reader.line_num, row
        return None

    def _output_names(self, names: list[str]) -> list[str]:
        if self.header:
            return names
        return [f"column_{i + 1}" for i in range(len(names))]

    def _read_options(
        self,
        *,
        column_names: list[str] | None = None,
        skip_rows: int = 0,
        autogenerate: bool = False,
    ) -> pacsv.ReadOptions:
        return pacsv.ReadOptions(
            block_size=self.block_size,
            column_names=column_names,
            skip_rows=skip_rows,
            autogenerate_column_names=autogenerate,
        )

    def _parse_options(self) -> pacsv.ParseOptions:
        return pacsv.ParseOptions(
            delimiter=self.separator,
            quote_char=self.quote,
            double_quote=True,
            escape_char=False,
            newlines_in_values=True,
            ignore_empty_lines=True,
        )

    def _convert_options(self, types: dict[str, pa.DataType]) -> pacsv.ConvertOptions:
        return pacsv.ConvertOptions(
            column_types=types,
            null_values=self.null_values,
            strings_can_be_null=True,
            quoted_strings_can_be_null=True,
            true_values=_TRUE,
            false_values=_FALSE,
        )

    def _open(
        self, read_options: pacsv.ReadOptions, types: dict[str, pa.DataType]
    ) -> pacsv.CSVStreamingReader:
        reader = self._stream(self.path, read_options, types)
        if reader is None:
            raise ReadError("the file is empty", path=self.name)
        return reader

    def _stream(
        self,
        source: Path | pa.NativeFile,
        read_options: pacsv.ReadOptions,
        types: dict[str, pa.DataType],
    ) -> pacsv.CSVStreamingReader | None:
        """A streaming reader of ``source``; None when it has no record (and no header)."""
        try:
            return pacsv.open_csv(
                source,
                read_options=read_options,
                parse_options=self._parse_options(),
                convert_options=self._convert_options(types),
                memory_pool=pipeline_pool(),
            )
        except pa.ArrowInvalid as e:
            if str(e) == "Empty CSV file":
                return None
            raise self._translate(e) from None
        except pa.ArrowNotImplementedError as e:
            raise ReadError(str(e), path=self.name) from None

    def _all_batches(
        self,
        reader: pacsv.CSVStreamingReader,
        types: dict[str, pa.DataType],
        direct: dict[str, pa.DataType] | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """The file's batches in ``types`` (``direct``: types segments try first): from the
        open ``reader`` for a file of one segment, else from segments and the streamed rest."""
        if self.path.stat().st_size <= self.segment_size:
            yield from read_batches(reader, self._translate)
            return
        reader.close()
        cutter = SegmentCutter(self.path, quote=self.quote, size=self.segment_size)

        def parse(segment: Segment) -> pa.RecordBatch | None:
            return self._parse_segment(segment, types, direct or types)

        try:
            for batch in ordered_map(parse, cutter, workers=PARSERS, name="csv-parse"):
                if batch is not None:
                    yield batch
        except pa.ArrowInvalid as e:
            raise self._translate(e) from None
        if cutter.rest is not None:
            yield from self._stream_rest(cutter.rest, types)

    def _parse_segment(
        self, segment: Segment, types: dict[str, pa.DataType], direct: dict[str, pa.DataType]
    ) -> pa.RecordBatch | None:
        """The segment's records in ``direct`` types if the converter takes them and its
        times are in years 1-9999, else in ``types``; None when it has no records. Runs on a
        parser thread: a parse error (``ArrowInvalid``) is raised to the consumer."""
        if direct != types and self.direct_time:
            try:
                batch = self._read_segment(segment, direct)
            except pa.ArrowInvalid:
                self.direct_time = False  # e.g. times without a zone: the next ones too
            else:
                if batch is None or not any(
                    first_out_of_range(c) is not None for c in batch.columns
                ):
                    return batch
        return self._read_segment(segment, types)

    def _read_segment(
        self, segment: Segment, types: dict[str, pa.DataType]
    ) -> pa.RecordBatch | None:
        read_options = pacsv.ReadOptions(
            use_threads=False,
            block_size=len(segment.data) + 1,  # one block: one batch
            column_names=list(types),
            skip_rows=int(self.header) if segment.offset == 0 else 0,
        )
        try:
            table = pacsv.read_csv(
                pa.BufferReader(pa.py_buffer(segment.data)),
                read_options=read_options,
                parse_options=self._parse_options(),
                convert_options=self._convert_options(types),
                memory_pool=pipeline_pool(),
            )
        except pa.ArrowInvalid as e:
            if str(e) == "Empty CSV file":  # only a header, or blank lines
                return None
            raise
        if table.num_rows == 0:
            return None
        return table.combine_chunks().to_batches()[0]

    def _stream_rest(self, offset: int, types: dict[str, pa.DataType]) -> Iterator[pa.RecordBatch]:
        """The batches of the file from ``offset`` (a record's start) on, streamed."""
        source = pa.OSFile(str(self.path))
        try:
            source.seek(offset)
            read_options = pacsv.ReadOptions(
                block_size=self.block_size,
                column_names=list(types),
                skip_rows=int(self.header) if offset == 0 else 0,  # quoted from the first line
            )
            reader = self._stream(source, read_options, types)
            if reader is not None:
                yield from read_batches(reader, self._translate)
        finally:
            source.close()

    def _renamed_batches(
        self, batches: Iterator[pa.RecordBatch], schema: pa.Schema
    ) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield pa.RecordBatch.from_arrays(batch.columns, schema=schema)

    def _typed_batches(
        self, batches: Iterator[pa.RecordBatch], schema: pa.Schema
    ) -> Iterator[pa.RecordBatch]:
        """Batches converted to the DDL schema: temporal columns parsed, NOT NULL checked."""
        first_record = 0
        for batch in batches:
            yield conform_batch(
                batch,
                schema,
                first=first_record,
                bad_record=self._bad_record,
                null_problem="empty value in a NOT NULL column",
            )
            first_record += batch.num_rows

    # --- error locations -------------------------------------------------------------------------

    def _records(self) -> Iterator[tuple[int, int, list[str]]]:
        """(record index, line number, fields) of the data records, re-read with ``csv``."""
        with open(self.path, newline="", encoding="utf-8", errors="replace") as f:
            reader = pycsv.reader(
                f, delimiter=self.separator, quotechar=self.quote, doublequote=True
            )
            index = 0
            skipped_header = not self.header
            for row in reader:
                if not row:
                    continue
                if not skipped_header:
                    skipped_header = True
                    continue
                yield index, reader.line_num, row
                index += 1

    def _bad_record(self, record: int, column: str, reason: str) -> ReadError:
        line = next((ln for i, ln, _ in self._records() if i == record), None)
        where = f"{self.name}:{line}" if line is not None else self.name
        return ReadError(f"column {column!r}: {reason}", path=where)

    def _translate(self, error: pa.ArrowInvalid) -> ReadError:
        message = _ROW_NUMBER.sub("", str(error))
        m = _CONVERSION_ERROR.search(message)
        if m:
            column_index, type_name, value = int(m.group(1)), m.group(2), m.group(3)
            column = (
                self.names[column_index] if column_index < len(self.names) else f"#{column_index}"
            )
            line = next(
                (
                    ln
                    for _, ln, row in self._records()
                    if column_index < len(row) and row[column_index] == value
                ),
                None,
            )
            where = f"{self.name}:{line}" if line is not None else self.name
            return ReadError(f"column {column!r}: invalid {type_name} value {value!r}", path=where)
        m = _FIELD_COUNT_ERROR.search(message)
        if m:
            expected, got = int(m.group(1)), int(m.group(2))
            line = next((ln for _, ln, row in self._records() if len(row) == got), None)
            where = f"{self.name}:{line}" if line is not None else self.name
            return ReadError(f"expected {expected} fields, got {got}", path=where)
        return ReadError(message.splitlines()[0], path=self.name)


def _listed(names: list[str]) -> str:
    return "[" + ", ".join(names) + "]"


def _difference(header: list[str], matched: list[str | None], expected: list[str]) -> str:
    """What keeps the header from being a permutation of the schema's names, in words."""
    unknown = [h for h, m in zip(header, matched, strict=True) if m is None]
    missing = [n for n in expected if n not in matched]
    repeated = sorted({m for m in matched if m is not None and matched.count(m) > 1})
    parts = []
    if missing:
        parts.append(f"missing: {', '.join(missing)}")
    if unknown:
        parts.append(f"not in the schema: {', '.join(unknown)}")
    if repeated:
        parts.append(f"repeated: {', '.join(repeated)}")
    return "; ".join(parts)


def check_csv_options(step: ReadStepCsv) -> tuple[str, str]:
    """Refuse the options this reader does not support (the same as the reference's, see
    the module doc); the separator and quote characters. Needs no file (``odf add``)."""
    separator = _single_char(step.separator, ",", "separator")
    quote = _single_char(step.quote, '"', "quote")
    _check_default(step.encoding, ("utf8", "utf-8"), "encoding")
    _check_default(step.date_format, ("rfc3339",), "dateFormat")
    _check_default(step.timestamp_format, ("rfc3339",), "timestampFormat")
    if step.escape:
        raise UnsupportedOptionError(
            f"escape {step.escape!r} is not supported: quotes are escaped by doubling",
            path="read.escape",
        )
    return separator, quote


def _single_char(value: str | None, default: str, option: str) -> str:
    if not value:
        return default
    if len(value.encode()) != 1:
        raise UnsupportedOptionError(
            f"{option} must be a single byte, got {value!r}", path=f"read.{option}"
        )
    return value


def _check_default(value: str | None, allowed: tuple[str, ...], option: str) -> None:
    if value is not None and value.lower() not in allowed:
        raise UnsupportedOptionError(
            f"{option} {value!r} is not supported (only {allowed[0]!r})", path=f"read.{option}"
        )
