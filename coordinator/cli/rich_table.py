"""Tables printed by rich: on a terminal, and elsewhere when plain columns cannot match it.

Imported only when a table needs it (``coordinator.cli.output``): rich costs CLI start time.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TextIO

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


def print_table(columns: list[str], rows: list[list[str]], out: TextIO) -> None:
    """Print the table of ``rows`` (cells as text) under ``columns`` to ``out``."""
    is_tty = out.isatty()
    console = Console(
        file=out,
        width=None if is_tty else PLAIN_WIDTH,
        no_color=not is_tty,
        highlight=False,
        soft_wrap=False,
    )
    table = Table(show_edge=is_tty, pad_edge=False)
    if not is_tty:
        table.box = None
    for c in columns:
        table.add_column(Text(c), overflow="fold")  # Text: no markup in names from elsewhere
    for row in rows:
        table.add_row(*[_Cell(cell) for cell in row])
    if is_tty:
        console.print(table)
        return
    with console.capture() as capture:
        console.print(table)
    out.write("".join(line.rstrip() + "\n" for line in capture.get().splitlines()))
