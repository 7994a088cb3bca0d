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
from enum import Enum
from typing import Any, TextIO

from common.humanize import human_cell, plain


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
    if fmt is OutputFormat.TABLE:
        by_column = [[human_cell(r.get(c)) for r in rows] for c in columns]
        if not wide:
            by_column = [
                short_hashes(cells) if _is_hash_column(rows, c) else cells
                for c, cells in zip(columns, by_column, strict=True)
            ]
        cells = [[column[i] for column in by_column] for i in range(len(rows))]
    else:
        cells = [[plain(r.get(c)) for c in columns] for r in rows]
    _render(cells, columns, fmt, out if out is not None else sys.stdout, wide, optional)


def render_cells(
    cells: Sequence[Sequence[Any]], columns: Sequence[str], fmt: str, *, wide: bool = False
) -> None:
    """Print rows already shown as cells (``render_rows``' second half) to stdout: a table's
    cells as text (``human_cell``), the machine formats' as plain values (``plain``)."""
    _render(cells, columns, OutputFormat(fmt), sys.stdout, wide, ())


def _render(
    cells: Sequence[Sequence[Any]],
    columns: Sequence[str],
    fmt: OutputFormat,
    out: TextIO,
    wide: bool,
    optional: Sequence[str],
) -> None:
    if fmt is OutputFormat.TABLE:
        _table(cells, columns, out, wide=wide, optional=optional)
        return
    if fmt is OutputFormat.JSON:
        import json  # here, as yaml and csv: a table (the default) needs none of them

        records = [dict(zip(columns, row, strict=True)) for row in cells]
        out.write(json.dumps(records, indent=2, ensure_ascii=False) + "\n")
    elif fmt is OutputFormat.YAML:
        out.write(_yaml([dict(zip(columns, row, strict=True)) for row in cells]))
    elif fmt is OutputFormat.CSV:
        import csv

        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        for row in cells:
            writer.writerow(["" if v is None else _cell(v) for v in row])


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
    rows: Sequence[Sequence[str]],
    columns: Sequence[str],
    out: TextIO,
    *,
    wide: bool,
    optional: Sequence[str],
) -> None:
    from coordinator.cli.terminal_text import visible

    cells = [[visible(cell, lines=True) for cell in row] for row in rows]
    headers = [visible(c, lines=True) for c in columns]
    if not out.isatty():
        text = plain_table(headers, cells)
        if text is not None:
            out.write(text)
            return
    from coordinator.cli.rich_table import print_table  # rich: only when it is needed

    droppable = [columns.index(c) for c in optional if c in columns]
    print_table(headers, cells, out, wide=wide, optional=droppable)


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
