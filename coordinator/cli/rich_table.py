"""Tables printed by rich: on a terminal, and elsewhere when plain columns cannot match it.

Imported only when a table needs it (``coordinator.cli.output``): rich costs CLI start time.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TextIO

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from coordinator.cli.output import PLAIN_WIDTH


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


def print_table(
    columns: list[str],
    rows: list[list[str]],
    out: TextIO,
    *,
    wide: bool = False,
    optional: Sequence[int] = (),
) -> None:
    """Print the table of ``rows`` (cells as text) under ``columns`` to ``out``.

    On a terminal the table fits its width (``COLUMNS``): headers and one-word cells (names,
    hashes, times, numbers) are never split, text folds; when even that does not fit, the
    ``optional`` columns (indices, the last first) are left out and a line says which.
    ``wide`` prints every column at its natural width instead (the terminal wraps the lines).
    """
    is_tty = out.isatty()
    console = Console(
        file=out,
        width=None if is_tty else PLAIN_WIDTH,
        no_color=not is_tty,
        highlight=False,
        soft_wrap=False,
    )
    kept = list(range(len(columns)))
    if is_tty and wide:
        console.width = max(console.width, _natural_width(columns, rows, kept))
    elif is_tty:
        for dropped in reversed(optional):
            if _least_width(columns, rows, kept) <= console.width:
                break
            kept.remove(dropped)
    table = Table(show_edge=False, pad_edge=False, box=box.SIMPLE_HEAD if is_tty else None)
    for i in kept:
        table.add_column(  # Text: no markup in names from elsewhere
            Text(columns[i]), overflow="fold", min_width=_least_column(columns, rows, i)
        )
    for row in rows:
        table.add_row(*[_Cell(row[i]) for i in kept])
    if is_tty:
        console.print(table)
        left_out = [columns[i] for i in range(len(columns)) if i not in kept]
        if left_out:
            console.print(
                Text(
                    f"({', '.join(left_out)}: left out at {console.width} columns, --wide shows"
                    " them)",
                    style="dim",
                )
            )
        return
    with console.capture() as capture:
        console.print(table)
    out.write("".join(line.rstrip() + "\n" for line in capture.get().splitlines()))


_GAP = 3
"""Between two columns of a terminal table: padding, the (blank) rule, padding."""


_WORD = 40
"""A cell without spaces up to this long (a name, hash, time, number) is never split."""
_TEXT = 24
"""Text (a cell with spaces, or a longer word) folds, but into lines of at least this."""


def _least_column(columns: list[str], rows: list[list[str]], i: int) -> int:
    """The narrowest column ``i`` can be without splitting its header or a one-word cell,
    nor folding its text into lines narrower than ``_TEXT``."""
    least = cell_len(columns[i])
    for row in rows:
        width = cell_len(row[i])
        if width <= _WORD and not any(c.isspace() for c in row[i]):
            least = max(least, width)
        else:
            least = max(least, min(width, _TEXT))
    return least


def _least_width(columns: list[str], rows: list[list[str]], kept: list[int]) -> int:
    return sum(_least_column(columns, rows, i) for i in kept) + _GAP * (len(kept) - 1)


def _natural_width(columns: list[str], rows: list[list[str]], kept: list[int]) -> int:
    widths = [
        max([cell_len(columns[i]), *(cell_len(line) for r in rows for line in r[i].splitlines())])
        for i in kept
    ]
    return sum(widths) + _GAP * (len(kept) - 1)
