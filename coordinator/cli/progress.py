"""Progress on the terminal: rich bars on stderr for long commands.

Shown only when stderr is a terminal, never with ``--quiet``, and never for a command whose
output is machine-readable (``-o json|csv|yaml``): stdout stays clean either way, the bars
are on stderr and vanish when done. Tasks count bytes (fetches, with speed) or any other unit
(``records``, ``replays``...). rich (``rich_progress``) is imported only when bars may be
shown: a ``--quiet`` or machine-readable command starts without it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from coordinator.ingest.progress import Progress as IngestProgress
    from coordinator.ingest.progress import ProgressTask


class _Hidden:
    """No progress shown: what ``coordinator.ingest.progress.NO_PROGRESS`` does, without
    importing the ingest code (and pyarrow with it) into a command that runs none of it (a
    pull of derivatives, anything through the daemon)."""

    def task(self, description: str, *, total: int | None = None, unit: str = "B") -> ProgressTask:
        del description, total, unit
        return self

    def advance(self, amount: int) -> None:
        del amount

    def phase(self, text: str) -> None:
        del text

    def close(self) -> None:
        pass


HIDDEN: IngestProgress = _Hidden()


def progress_wanted(args: argparse.Namespace) -> bool:
    """Whether a command may show progress: not ``--quiet``, and table output (if any)."""
    return not getattr(args, "quiet", False) and getattr(args, "output_format", "table") == "table"


RICH_TERMINAL_ENV = ("FORCE_COLOR", "TTY_COMPATIBLE")
"""Variables by which rich may take a non-terminal for a terminal (then rich decides)."""


def _stderr_tty() -> bool:
    """Whether rich may take stderr for a terminal, asked without importing rich (~30 ms of
    a thin client's start): ``False`` only when rich would say so too."""
    if any(name in os.environ for name in RICH_TERMINAL_ENV):
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # no stderr, or closed: rich says no terminal
        return False


@contextmanager
def terminal_progress(
    args: argparse.Namespace | None = None, *, console: Console | None = None
) -> Iterator[IngestProgress]:
    """Rich progress bars when the console (default: stderr) is a terminal and ``args``
    allow them (``progress_wanted``), otherwise none."""
    if (args is not None and not progress_wanted(args)) or (console is None and not _stderr_tty()):
        yield HIDDEN
        return
    from rich.console import Console

    from coordinator.cli.rich_progress import RichProgress

    console = console or Console(stderr=True, soft_wrap=True)  # printed lines stay whole
    if not console.is_terminal:
        yield HIDDEN
        return
    progress = RichProgress(console)
    try:
        yield progress
    finally:
        progress.stop()
