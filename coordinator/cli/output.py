"""Rendering command results as a table, JSON, CSV or YAML (``--output-format``).

Commands produce plain rows (``dict`` of column -> value) or documents (nested plain data);
this module alone decides how they look. Tables use rich on a terminal, and plain aligned
columns (``plain_table``: the same text, without importing rich) elsewhere when no cell needs
rich's wrapping or wide-character rules. Tables are for people: times in one format
(``common.humanize``), booleans as ``true``/``false``, hashes cut to their shortest unique
prefix (whole with ``--wide``), columns fitted to the terminal (``rich_table``). The other
formats are for machines and exact: datetimes become RFC 3339 strings with every digit,
``None`` is ``null`` (JSON, YAML) or empty (CSV), hashes are whole.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Any, TextIO

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
    parser.add_argument(
        "--wide",
        action="store_true",
        help="tables: whole hashes and every column, however wide the terminal",
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
    wide: bool = False,
    optional: Sequence[str] = (),
) -> None:
    """Print ``rows`` (each a mapping with at least ``columns``) in format ``fmt``. A table
    on a terminal too narrow for it leaves out the ``optional`` columns (the last named first)
    until it fits, and says so; ``wide`` keeps them and the hashes whole."""
    fmt = OutputFormat(fmt)
    out = out if out is not None else sys.stdout
    if fmt is OutputFormat.TABLE:
        _table(rows, columns, out, wide=wide, optional=optional)
        return
    records = [{c: plain(r.get(c)) for c in columns} for r in rows]
    if fmt is OutputFormat.JSON:
        import json  # here, as yaml and csv: a table (the default) needs none of them

        out.write(json.dumps(records, indent=2, ensure_ascii=False) + "\n")
    elif fmt is OutputFormat.YAML:
        out.write(_yaml(records))
    elif fmt is OutputFormat.CSV:
        import csv

        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        for r in records:
            writer.writerow(["" if r[c] is None else _cell(r[c]) for c in columns])


def render_document(doc: Any, fmt: OutputFormat | str, *, out: TextIO | None = None) -> None:
    """Print one nested document as JSON or YAML."""
    fmt = OutputFormat(fmt)
    out = out if out is not None else sys.stdout
    if fmt is OutputFormat.JSON:
        import json

        out.write(json.dumps(plain(doc), indent=2, ensure_ascii=False) + "\n")
    elif fmt is OutputFormat.YAML:
        out.write(_yaml(plain(doc)))
    else:
        raise ValueError(f"a document cannot be printed as {fmt.value}")


def _yaml(value: Any) -> str:
    import yaml

    return yaml.safe_dump(value, sort_keys=False, allow_unicode=True)


def _cell(value: Any) -> str:
    if isinstance(value, bool):  # as JSON, YAML and exported CSV spell them
        return "true" if value else "false"
    if isinstance(value, list | dict):
        import json

        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    out: TextIO,
    *,
    wide: bool,
    optional: Sequence[str],
) -> None:
    from coordinator.cli.terminal_text import visible

    by_column = [[_human_cell(r.get(c)) for r in rows] for c in columns]
    if not wide:
        by_column = [
            short_hashes(cells) if _is_hash_column(rows, c) else cells
            for c, cells in zip(columns, by_column, strict=True)
        ]
    cells = [[visible(column[i], lines=True) for column in by_column] for i in range(len(rows))]
    headers = [visible(c, lines=True) for c in columns]
    if not out.isatty():
        text = plain_table(headers, cells)
        if text is not None:
            out.write(text)
            return
    from coordinator.cli.rich_table import print_table  # rich: only when it is needed

    droppable = [columns.index(c) for c in optional if c in columns]
    print_table(headers, cells, out, wide=wide, optional=droppable)


def _human_cell(value: Any) -> str:
    if isinstance(value, list | dict):
        import json

        return json.dumps(plain(value), ensure_ascii=False)
    if isinstance(value, Enum):
        return str(value.value)
    from common.humanize import human_value

    return human_value(value)


def _is_hash_column(rows: Sequence[Mapping[str, Any]], column: str) -> bool:
    from common.odf.multihash import Multihash

    values = [r.get(column) for r in rows if r.get(column) is not None]
    return bool(values) and all(isinstance(v, Multihash) for v in values)


SHORT_HASH = 13
"""Characters of a hash shown in a table: the multibase and multihash prefix (``f1620``) and
8 hex digits of the digest, more when two hashes of the table share them."""


def short_hashes(hashes: Sequence[str]) -> list[str]:
    """``hashes`` cut to one length, the shortest (from ``SHORT_HASH``) at which the distinct
    ones stay distinct: each is then a prefix ``odf reset`` and others accept."""
    distinct = {h for h in hashes if h}
    length = SHORT_HASH
    while len({h[:length] for h in distinct}) < len(distinct):
        length += 1
    return [h[:length] for h in hashes]


PLAIN_WIDTH = 400
"""The width of a table printed to a file or a pipe (rich's console width there)."""


def plain_table(columns: list[str], rows: list[list[str]]) -> str | None:
    """The table as rich prints it to a non-terminal (no box, columns two spaces apart,
    lines right-stripped), or ``None`` when rich's layout could differ: a cell with anything
    but printable ASCII (line breaks, tabs, wide characters) or lines wider than
    ``PLAIN_WIDTH`` (rich then folds cells)."""
    widths = [len(c) for c in columns]
    for row in [columns, *rows]:
        for i, cell in enumerate(row):
            if not (cell.isascii() and cell.isprintable()):
                return None
            widths[i] = max(widths[i], len(cell))
    if sum(widths) + 2 * (len(widths) - 1) > PLAIN_WIDTH:
        return None
    return "".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n"
        for row in [columns, *rows]
    )
