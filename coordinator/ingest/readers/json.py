"""ReadStep::NdJson and ReadStep::Json over ``pyarrow.json``.

NdJson: one object per line, blank lines skipped. With a DDL schema, keys match exactly
(case-sensitive), unknown keys are ignored and missing keys are NULL; the file is streamed.
Without one, types are inferred over the whole file and columns are ordered as the
reference orders them (keys sorted within a record, keys first seen later appended).

Json: the whole document is parsed; ``subPath`` (``a.b.c``) selects the array of records.
Each record is re-serialized with sorted keys and read as NdJson.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.json as pajson

from common.odf.fragments import ReadStepJson, ReadStepNdJson
from coordinator.ingest.ddl import parse_read_schema
from coordinator.ingest.errors import ReadError, UnsupportedOptionError
from coordinator.ingest.readers import json_depth
from coordinator.ingest.readers.stream import DataStream, read_batches
from coordinator.ingest.readers.temporal import conform_batch, is_temporal

BLOCK_SIZE = 8 << 20
INFERENCE_RECORDS = 1000
"""Records whose keys decide the column order of an inferred schema (as the reference)."""

Describe = Callable[[int], str]
"""Turns a 1-based line of the NDJSON input into the location shown in errors."""


def read_ndjson(step: ReadStepNdJson, path: Path, *, name: str) -> DataStream:
    _check_options(step.encoding, step.date_format, step.timestamp_format)
    schema = parse_read_schema(step.schema) if step.schema else None
    return NdJsonReader(schema, str(path), name, lambda n: f"{name}:{n}").open(_line_source(path))


def read_json(step: ReadStepJson, path: Path, *, name: str) -> DataStream:
    _check_options(step.encoding, step.date_format, step.timestamp_format)
    schema = parse_read_schema(step.schema) if step.schema else None
    document = load_document(path, name)
    records, where = _select(document, step.sub_path, name)
    return read_records(records, schema, name=name, describe=lambda n: f"{name}: {where}[{n - 1}]")


def read_records(
    records: list[Any], schema: pa.Schema | None, *, name: str, describe: Describe
) -> DataStream:
    """Records (decoded JSON objects) read as NdJson lines with sorted keys."""
    text = "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in records)
    data = text.encode()
    lines = text.splitlines()
    return NdJsonReader(schema, pa.BufferReader(data), name, describe).open(lambda: iter(lines))


def load_document(path: Path, name: str) -> Any:
    """A whole JSON document from elsewhere, its depth checked before it is decoded."""
    data = path.read_bytes()
    json_depth.check_text(data, lambda n: f"{name}:{n}", lines=False)
    try:
        return json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ReadError(f"invalid JSON: {e}", path=name) from None


def _select(document: Any, sub_path: str | None, name: str) -> tuple[list[Any], str]:
    node = document
    walked: list[str] = []
    for key in sub_path.split(".") if sub_path else []:
        walked.append(key)
        node = node.get(key) if isinstance(node, dict) else None
        if node is None:
            raise ReadError(f"sub-path {'.'.join(walked)!r} not found", path=name)
    if not isinstance(node, list):
        what = f"sub-path {sub_path!r}" if sub_path else "the document root"
        raise ReadError(f"{what} is not an array", path=name)
    return node, sub_path or "$"


def _line_source(path: Path) -> Callable[[], Iterator[str]]:
    def lines() -> Iterator[str]:
        with open(path, encoding="utf-8", errors="replace") as f:
            yield from f

    return lines


def _check_options(encoding: str | None, date_format: str | None, ts_format: str | None) -> None:
    for option, value, allowed in (
        ("encoding", encoding, ("utf8", "utf-8")),
        ("dateFormat", date_format, ("rfc3339",)),
        ("timestampFormat", ts_format, ("rfc3339",)),
    ):
        if value is not None and value.lower() not in allowed:
            raise UnsupportedOptionError(
                f"{option} {value!r} is not supported (only {allowed[0]!r})", path=f"read.{option}"
            )


class NdJsonReader:
    """Reads NDJSON from ``source``; errors are located by re-reading the lines."""

    def __init__(
        self, schema: pa.Schema | None, source: str | pa.NativeFile, name: str, describe: Describe
    ) -> None:
        self.schema = schema
        self.source = source
        self.name = name
        self.describe = describe
        self.lines: Callable[[], Iterator[str]] = lambda: iter(())

    def open(self, lines: Callable[[], Iterator[str]]) -> DataStream:
        self.lines = lines
        if self.schema is None:
            return self._inferred()
        read_schema = pa.schema(
            [pa.field(f.name, pa.string() if is_temporal(f.type) else f.type) for f in self.schema]
        )
        parse = pajson.ParseOptions(explicit_schema=read_schema, unexpected_field_behavior="ignore")
        try:
            reader = pajson.open_json(
                self.source,
                read_options=pajson.ReadOptions(block_size=BLOCK_SIZE),
                parse_options=parse,
            )
        except pa.ArrowInvalid as e:
            if "Empty JSON file" in str(e):
                return DataStream(self.schema, iter(()))
            raise self._translate(e) from None
        return DataStream(self.schema, self._typed_batches(reader, self.schema))

    def _inferred(self) -> DataStream:
        if isinstance(self.source, str):  # pyarrow's inference crashes on deep nesting
            json_depth.check_file(Path(self.source), self.describe)
        try:
            table = pajson.read_json(
                self.source, read_options=pajson.ReadOptions(block_size=1 << 30)
            )
        except pa.ArrowInvalid as e:
            if "Empty JSON file" in str(e):
                return DataStream(pa.schema([]), iter(()))
            raise self._translate(e) from None
        table = table.select(self._column_order(table.schema.names))
        return DataStream.of_table(table.cast(_sorted_structs(table.schema)))

    def _column_order(self, names: list[str]) -> list[str]:
        order: dict[str, None] = {}
        seen = 0
        for line in self.lines():
            if seen >= INFERENCE_RECORDS:
                break
            if not line.strip():
                continue
            seen += 1
            record = json.loads(line)
            if isinstance(record, dict):
                order.update(dict.fromkeys(sorted(record)))
        ordered = [n for n in order if n in names]
        return ordered + [n for n in names if n not in order]

    def _typed_batches(
        self, reader: pajson.JSONStreamingReader, schema: pa.Schema
    ) -> Iterator[pa.RecordBatch]:
        first = 0
        for batch in read_batches(reader, self._translate):
            yield self._convert(batch, schema, first)
            first += batch.num_rows

    def _convert(self, batch: pa.RecordBatch, schema: pa.Schema, first: int) -> pa.RecordBatch:
        return conform_batch(
            batch,
            schema,
            first=first,
            bad_record=self._record_error,
            null_problem="missing or null value",
        )

    # --- error locations ----------------------------------------------------------------------

    def _numbered_records(self) -> Iterator[tuple[int, int, str]]:
        """(record index, 1-based line, text) of the non-blank lines."""
        index = 0
        for number, line in enumerate(self.lines(), start=1):
            if line.strip():
                yield index, number, line
                index += 1

    def _record_error(self, record: int, field: str, reason: str) -> ReadError:
        line = next((n for i, n, _ in self._numbered_records() if i == record), None)
        where = self.describe(line) if line is not None else self.name
        return ReadError(f"field {field!r}: {reason}", path=where)

    def _translate(self, error: pa.ArrowInvalid) -> ReadError:
        """Find the record pyarrow choked on (its row numbers are block-relative)."""
        kinds: dict[str, str] = {}
        for _, number, text in self._numbered_records():
            try:
                record = json_depth.loads(text, self.describe(number))
            except ReadError as e:
                return e
            if not isinstance(record, dict):
                return ReadError(
                    f"expected an object, got {_kind(record)}", path=self.describe(number)
                )
            problem = self._check_record(record, kinds)
            if problem:
                return ReadError(problem, path=self.describe(number))
        return ReadError(str(error).splitlines()[0], path=self.name)

    def _check_record(self, record: dict[str, Any], kinds: dict[str, str]) -> str | None:
        if self.schema is not None:
            for field in self.schema:
                value = record.get(field.name)
                if value is not None and not _fits(value, field.type):
                    kind = _kind(value)
                    return f"field {field.name!r}: {kind} {value!r} is not a valid {field.type}"
            return None
        for key, value in record.items():
            if value is None:
                continue
            kind = _kind(value)
            previous = kinds.setdefault(key, kind)
            if previous != kind and {previous, kind} != {"integer", "number"}:
                return f"field {key!r}: {kind} {value!r} where earlier records have type {previous}"
        return None


def _sorted_structs(schema: pa.Schema) -> pa.Schema:
    """``schema`` with the fields of nested structs in key order, as the reference infers."""
    return pa.schema([f.with_type(_sorted_type(f.type)) for f in schema])


def _sorted_type(dtype: pa.DataType) -> pa.DataType:
    if pa.types.is_struct(dtype):
        fields = sorted((dtype.field(i) for i in range(dtype.num_fields)), key=lambda f: f.name)
        return pa.struct([f.with_type(_sorted_type(f.type)) for f in fields])
    if pa.types.is_list(dtype):
        return pa.list_(_sorted_type(dtype.value_type))
    return dtype


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else "null"


def _fits(value: Any, dtype: pa.DataType) -> bool:
    """Whether pyarrow's JSON reader accepts ``value`` for ``dtype`` (for error locating)."""
    kind = _kind(value)
    if pa.types.is_integer(dtype):
        return kind == "integer"
    if pa.types.is_floating(dtype) or pa.types.is_decimal(dtype):
        return kind in ("integer", "number")
    if pa.types.is_boolean(dtype):
        return kind == "boolean"
    if pa.types.is_string(dtype) or is_temporal(dtype) or pa.types.is_binary(dtype):
        return kind == "string"
    if pa.types.is_list(dtype):
        return kind == "array" and all(v is None or _fits(v, dtype.value_type) for v in value)
    if pa.types.is_struct(dtype):
        return kind == "object"
    return True
