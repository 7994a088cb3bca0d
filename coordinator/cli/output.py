"""Rendering command results as a table, JSON, CSV or YAML (``--output-format``).

Commands produce plain rows (``dict`` of column -> value) or documents (nested plain data);
this module alone decides how they look. Tables use rich; the other formats are for
machines: datetimes become RFC 3339 strings, ``None`` is ``null`` (JSON, YAML) or empty (CSV).
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Console, ConsoleOptions
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    import pyarrow as pa


class OutputFormat(Enum):
    TABLE = "table"
    JSON = "json"
    CSV = "csv"
    YAML = "yaml"


ALL_FORMATS = tuple(OutputFormat)


def add_output_format_argument(
    parser: Any,
    formats: Sequence[OutputFormat] = ALL_FORMATS,
    default: OutputFormat = OutputFormat.TABLE,
) -> None:
    """Add ``-o/--output-format`` with the given choices to an argparse parser."""
    parser.add_argument(
        "-o",
        "--output-format",
        choices=[f.value for f in formats],
        default=default.value,
        help=f"how to print the result (default: {default.value})",
    )


def plain(value: Any) -> Any:
    """``value`` with datetimes as RFC 3339 text and other non-JSON scalars as strings."""
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Enum):
        return value.value
    return str(value)


def table_rows(table: pa.Table) -> list[dict[str, Any]]:
    """The rows of ``table`` as Python values; a column holding invalid UTF-8 (which ingest
    refuses, but older or foreign data may hold) is shown with U+FFFD instead of failing."""
    columns: dict[str, list[Any]] = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        try:
            columns[name] = column.to_pylist()
        except UnicodeDecodeError:
            columns[name] = [
                _decoded(v) for v in column.cast(_binary_type(column.type)).to_pylist()
            ]
    return [{name: values[i] for name, values in columns.items()} for i in range(table.num_rows)]


def _binary_type(dtype: pa.DataType) -> pa.DataType:
    """``dtype`` with every string type replaced by binary (to read invalid UTF-8 as bytes)."""
    import pyarrow as pa

    if pa.types.is_string(dtype) or pa.types.is_string_view(dtype):
        return pa.binary()
    if pa.types.is_large_string(dtype):
        return pa.large_binary()
    if pa.types.is_list(dtype):
        return pa.list_(dtype.value_field.with_type(_binary_type(dtype.value_type)))
    if pa.types.is_large_list(dtype):
        return pa.large_list(dtype.value_field.with_type(_binary_type(dtype.value_type)))
    if pa.types.is_struct(dtype):
        fields = [dtype.field(i) for i in range(dtype.num_fields)]
        return pa.struct([f.with_type(_binary_type(f.type)) for f in fields])
    return dtype


def _decoded(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, list):
        return [_decoded(v) for v in value]
    if isinstance(value, dict):
        return {k: _decoded(v) for k, v in value.items()}
    return value


def render_rows(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    fmt: OutputFormat | str,
    *,
    out: TextIO | None = None,
) -> None:
    """Print ``rows`` (each a mapping with at least ``columns``) in format ``fmt``."""
    fmt = OutputFormat(fmt)
    out = out if out is not None else sys.stdout
    records = [{c: plain(r.get(c)) for c in columns} for r in rows]
    if fmt is OutputFormat.JSON:
        out.write(json.dumps(records, indent=2, ensure_ascii=False) + "\n")
    elif fmt is OutputFormat.YAML:
        out.write(_yaml(records))
    elif fmt is OutputFormat.CSV:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        for r in records:
            writer.writerow(["" if r[c] is None else _cell(r[c]) for c in columns])
    else:
        _table(records, columns, out)


def render_document(doc: Any, fmt: OutputFormat | str, *, out: TextIO | None = None) -> None:
    """Print one nested document as JSON or YAML."""
    fmt = OutputFormat(fmt)
    out = out if out is not None else sys.stdout
    if fmt is OutputFormat.JSON:
        out.write(json.dumps(plain(doc), indent=2, ensure_ascii=False) + "\n")
    elif fmt is OutputFormat.YAML:
        out.write(_yaml(plain(doc)))
    else:
        raise ValueError(f"a document cannot be printed as {fmt.value}")


def _yaml(value: Any) -> str:
    import yaml

    return yaml.safe_dump(value, sort_keys=False, allow_unicode=True)


def _cell(value: Any) -> str:
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


class _Cell(Text):
    """A table cell whose wrapped lines are rendered as separate segments.

    A plain ``Text`` renders all its wrapped lines as one segment joined with newlines, which
    rich then splits into lines with repeated ``str.partition`` (a copy of the rest each
    time): quadratic in the size of a cell (a 50 MB description made ``odf log`` take over
    10 minutes). Same wrapping, same output, linear.
    """

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Segment]:
        tab_size = console.tab_size if self.tab_size is None else self.tab_size
        lines = self.wrap(
            console,
            options.max_width,
            justify=self.justify or options.justify or "default",
            overflow=self.overflow or options.overflow or "fold",
            tab_size=tab_size or 8,
            no_wrap=bool(self.no_wrap if self.no_wrap is not None else options.no_wrap),
        )
        newline = Segment("\n")
        for i, line in enumerate(lines):
            if i:
                yield newline
            yield from line.render(console)
        if self.end:
            yield Segment(self.end)


def _table(records: list[dict[str, Any]], columns: Sequence[str], out: TextIO) -> None:
    is_tty = out.isatty()
    console = Console(
        file=out,
        width=None if is_tty else 400,
        no_color=not is_tty,
        highlight=False,
        soft_wrap=False,
    )
    table = Table(show_edge=is_tty, pad_edge=False)
    if not is_tty:
        table.box = None
    for c in columns:
        table.add_column(c, overflow="fold")
    for r in records:
        table.add_row(*[_Cell("" if r[c] is None else _cell(r[c])) for c in columns])
    if is_tty:
        console.print(table)
        return
    with console.capture() as capture:
        console.print(table)
    out.write("".join(line.rstrip() + "\n" for line in capture.get().splitlines()))
