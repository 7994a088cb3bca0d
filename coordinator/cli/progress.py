"""Progress on the terminal: rich bars on stderr for long commands.

Shown only when stderr is a terminal, never with ``--quiet``, and never for a command whose
output is machine-readable (``-o json|csv|yaml``): stdout stays clean either way, the bars
are on stderr and vanish when done. Tasks count bytes (fetches, with speed) or any other unit
(``records``, ``replays``...).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console, RenderableType
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TransferSpeedColumn,
)
from rich.text import Text

from coordinator.ingest.progress import NO_PROGRESS, ProgressTask
from coordinator.ingest.progress import Progress as IngestProgress


def progress_wanted(args: argparse.Namespace) -> bool:
    """Whether a command may show progress: not ``--quiet``, and table output (if any)."""
    return not getattr(args, "quiet", False) and getattr(args, "output_format", "table") == "table"


class _AmountColumn(ProgressColumn):
    """Bytes (with speed) for fetches, a count with its unit for everything else."""

    def __init__(self) -> None:
        super().__init__()
        self._bytes = DownloadColumn()
        self._speed = TransferSpeedColumn()

    def render(self, task: Task) -> RenderableType:
        if task.fields.get("unit") == "B":
            return Text.assemble(self._bytes.render(task), " ", self._speed.render(task))
        return Text(f"{int(task.completed):,} {task.fields.get('unit', 'records')}")


class _RichTask:
    def __init__(self, progress: Progress, task_id: TaskID) -> None:
        self._progress = progress
        self._task_id = task_id

    def advance(self, amount: int) -> None:
        self._progress.advance(self._task_id, amount)

    def close(self) -> None:
        self._progress.remove_task(self._task_id)


class _RichProgress:
    """One live display on stderr whose tasks are fetches (bytes) and ingests (records)."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            _AmountColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.progress.start()

    def task(self, description: str, *, total: int | None = None, unit: str = "B") -> ProgressTask:
        return _RichTask(self.progress, self.progress.add_task(description, total=total, unit=unit))

    def stop(self) -> None:
        self.progress.stop()


@contextmanager
def terminal_progress(
    args: argparse.Namespace | None = None, *, console: Console | None = None
) -> Iterator[IngestProgress]:
    """Rich progress bars when the console (default: stderr) is a terminal and ``args``
    allow them (``progress_wanted``), otherwise none."""
    console = console or Console(stderr=True)
    if not console.is_terminal or (args is not None and not progress_wanted(args)):
        yield NO_PROGRESS
        return
    progress = _RichProgress(console)
    try:
        yield progress
    finally:
        progress.stop()
