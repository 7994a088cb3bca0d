"""The rich progress display of ``progress.terminal_progress`` (imported only to show bars)."""

from __future__ import annotations

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

from coordinator.cli.terminal_text import visible
from coordinator.ingest.progress import ProgressTask


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


class RichProgress:
    """One live display on stderr whose tasks are fetches (bytes) and ingests (records)."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            _AmountColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.progress.start()

    def task(self, description: str, *, total: int | None = None, unit: str = "B") -> ProgressTask:
        """A task named by ``description``, which may quote a dataset, URL or the daemon:
        shown escaped (``visible``), never read as rich markup."""
        shown = visible(description)
        return _RichTask(self.progress, self.progress.add_task(shown, total=total, unit=unit))

    def stop(self) -> None:
        self.progress.stop()
