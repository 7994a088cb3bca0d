"""Progress display of ``odf ingest``/``odf pull``: one live display, bytes and records."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from common.odf.events import AddPushSource
from common.odf.fragments import MergeStrategyAppend, ReadStepCsv
from coordinator.cli.progress import HIDDEN, terminal_progress
from coordinator.ingest.push import push_ingest
from tests.unit.ingest.helpers import new_dataset


def terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=120), out


def test_not_a_terminal_shows_nothing() -> None:
    with terminal_progress(console=Console(file=io.StringIO(), force_terminal=False)) as progress:
        assert progress is HIDDEN
        task = progress.task("ingest data.csv", unit="records")  # takes everything, shows nothing
        task.advance(10)
        task.close()


def test_fetch_and_ingest_tasks_share_one_display(tmp_path: Path) -> None:
    console, out = terminal()
    with terminal_progress(console=console) as progress:
        fetch = progress.task("fetch http://x/data.csv", total=2048, unit="B")
        fetch.advance(1024)
        records = progress.task("ingest data.csv", unit="records")
        records.advance(1500)
        snapshot = Console(file=io.StringIO(), width=120)
        snapshot.print(progress.progress)  # the live renderable, as shown
        shown = snapshot.file.getvalue()  # type: ignore[attr-defined]
        fetch.close()
        records.close()

        source = AddPushSource(
            source_name="s", read=ReadStepCsv(schema=("n BIGINT",)), merge=MergeStrategyAppend()
        )
        ds = new_dataset(tmp_path, source)
        data = tmp_path / "n.csv"
        data.write_text("".join(f"{i}\n" for i in range(1000)))
        assert push_ingest(ds, data, progress=progress).num_records == 1000
    assert "fetch http://x/data.csv" in shown and "1.0/2.0 kB" in shown
    assert "ingest data.csv" in shown and "1,500 records" in shown
    assert out.getvalue()  # something was drawn on the terminal


def test_a_task_shows_text_from_elsewhere_escaped_and_never_as_markup() -> None:
    """A URL or dataset name from someone else's snapshot, or a daemon's task description."""
    console, _ = terminal()
    hostile = "fetch http://x/\x1b]0;pwned\x07\x1b[2J\u202e[bold red]a[/bold red]\x9b"
    with terminal_progress(console=console) as progress:
        task = progress.task(hostile, unit="B")
        snapshot = Console(file=io.StringIO(), width=200)
        snapshot.print(progress.progress)
        shown = snapshot.file.getvalue()  # type: ignore[attr-defined]
        task.close()
    assert "http://x/\\x1b]0;pwned\\x07\\x1b[2J\\u202e[bold red]a[/bold red]\\x9b" in shown
    assert not any(c in shown for c in "\x1b\x07\x9b\u202e")
