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
from rich.table import Column
from rich.text import Text

from coordinator.cli.terminal_text import visible


class _AmountColumn(ProgressColumn):
    """Bytes (with speed) for fetches, a count with its unit for everything else (``1 record``,
    ``1,364,334 records``); nothing before the first one is counted (``_PhaseColumn`` says
    what is going on meanwhile) nor for a task without a unit (a phase)."""

    def __init__(self) -> None:
        super().__init__(table_column=Column(no_wrap=True))
        self._bytes = DownloadColumn()
        self._speed = TransferSpeedColumn()

    def render(self, task: Task) -> RenderableType:
        unit = str(task.fields.get("unit", "records"))
        if unit == "B":
            return Text.assemble(self._bytes.render(task), " ", self._speed.render(task))
        count = int(task.completed)
        if not unit or not count:
            return Text("")
        return Text(f"{count:,} {unit[:-1] if count == 1 and unit.endswith('s') else unit}")


class _RichTask:
    def __init__(self, progress: Progress, task_id: TaskID) -> None:
        self._progress = progress
        self._task_id = task_id

    def advance(self, amount: int) -> None:
        self._progress.advance(self._task_id, amount)

    def phase(self, text: str) -> None:
        """What the task is doing now (``reading day-1.csv``, ``starting engine ...``)."""
        self._progress.update(self._task_id, phase=visible(text))

    def close(self) -> None:
        self._progress.remove_task(self._task_id)


class RichProgress:
    """One live display on stderr whose tasks are fetches (bytes) and ingests (records).

    Each task is one line that fits the terminal: the description and the phase are cut
    (``…``) rather than wrapped; lines printed meanwhile (``console``: soft wrap) are never
    broken by rich, whatever their length."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn(
                "{task.description}",
                markup=False,
                table_column=Column(no_wrap=True, overflow="ellipsis", ratio=3),
            ),
            BarColumn(bar_width=12),
            _AmountColumn(),
            TimeElapsedColumn(),
            TextColumn(
                "{task.fields[phase]}",
                markup=False,
                style="dim",
                table_column=Column(no_wrap=True, overflow="ellipsis", ratio=2),
            ),
            console=console,
            transient=True,
            expand=True,
        )
        self.progress.start()

    def task(self, description: str, *, total: int | None = None, unit: str = "B") -> _RichTask:
        """A task named by ``description``, which may quote a dataset, URL or the daemon:
        shown escaped (``visible``), never read as rich markup."""
        shown = visible(description)
        task_id = self.progress.add_task(shown, total=total, unit=unit, phase="")
        return _RichTask(self.progress, task_id)

    def stop(self) -> None:
        self.progress.stop()
