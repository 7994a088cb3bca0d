"""``odf pull NAME... | --all``: bring datasets up to date (``Application.pull``).

Root datasets run their polling source until it is exhausted (one commit per fetched slice);
derivative datasets run transformations until their inputs are fully processed (bounded
transactions). Datasets are pulled in dependency order (inputs first); ``--recursive`` also
pulls everything upstream. One engine serves the whole command (started on first use). Each
event of the pull is printed as one line. A dataset that fails does not stop the others (what
depends on it is skipped); every failure is printed on stderr at the end and the exit code is
1. ``--fail-fast`` stops at the first.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from common.humanize import human_time, plural
from coordinator.app import PullOptions
from coordinator.app import pull_events as events
from coordinator.cli.arguments import optional_time
from coordinator.cli.connect import add_daemon_argument, use_cases
from coordinator.cli.progress import terminal_progress
from coordinator.cli.sharing import add_transfer_arguments, remote_pulls
from coordinator.cli.terminal_text import visible

if TYPE_CHECKING:
    from coordinator.ingest.progress import Progress, ProgressTask


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("pull", help="update datasets from their sources")
    p.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="datasets to pull; a URL or REPO/NAME clones or updates a remote dataset",
    )
    p.add_argument("--as", dest="as_name", metavar="NAME", help="the local name of a clone")
    p.add_argument("--all", action="store_true", help="pull every dataset in the workspace")
    p.add_argument(
        "-r",
        "--recursive",
        action="store_true",
        help="also pull the datasets the named ones depend on (inputs first); for a clone or"
        " a URL, also clone its missing inputs (as --with-inputs)",
    )
    p.add_argument(
        "--with-inputs",
        action="store_true",
        help="for a URL or a clone: also clone the inputs it reads that this workspace lacks,"
        " from the same repository (recursively)",
    )
    p.add_argument(
        "--system-time",
        metavar="RFC3339",
        help="system time of the new blocks and records, ingested or transformed"
        " (default: now); makes a pull reproducible",
    )
    p.add_argument(
        "--fail-fast",
        action="store_true",
        help="stop at the first dataset that fails (default: go on with the others, skip what"
        " depends on a failed dataset, report every failure at the end, exit 1)",
    )
    p.add_argument(
        "--keep-going",
        action="store_false",
        dest="fail_fast",
        help="the default: go on past a failing dataset",
    )
    p.add_argument(
        "--fetch-uncacheable",
        action="store_true",
        help="fetch sources that keep no state (no ETag/Last-Modified) again",
    )
    add_transfer_arguments(p)
    add_daemon_argument(p, writes=True)
    p.set_defaults(handler=cmd_pull)


def cmd_pull(args: argparse.Namespace) -> int:
    pulled = bool(args.names) or args.all
    args.names, args.all, remote_failures = remote_pulls(args)
    if pulled and not args.names and not args.all:
        return 1 if remote_failures else 0
    return max(_pull_local(args), 1 if remote_failures else 0)


def _pull_local(args: argparse.Namespace) -> int:
    app = use_cases(args)
    options = PullOptions(
        all_datasets=args.all,
        recursive=args.recursive,
        system_time=optional_time(args.system_time, "--system-time"),
        fetch_uncacheable=args.fetch_uncacheable,
        fail_fast=args.fail_fast,
    )
    failures: list[events.PullFailed] = []
    with terminal_progress(args) as progress:
        tasks = _PullTasks(progress)
        for event in app.pull(args.names, replace(options, progress=tasks)):
            tasks.update(event)
            if isinstance(event, events.PullFailed):
                failures.append(event)
            elif not isinstance(event, events.PullStarted):
                print(visible(describe_pull_event(event)))
        tasks.close()
    if len(failures) == 1:  # the common case: one line, as when the pull stops there
        print(f"error: {visible(str(failures[0].error))}", file=sys.stderr)
        return 1
    for f in failures:
        print(f"error: {f.dataset}: {visible(str(f.error))}", file=sys.stderr)
    if failures:
        failed = [f.dataset for f in failures if f.skipped is None]
        skipped = [f.dataset for f in failures if f.skipped is not None]
        summary = f"pull failed: {', '.join(failed)}"
        if skipped:
            summary += f"; skipped (an input failed): {', '.join(skipped)}"
        print(f"error: {summary}", file=sys.stderr)
        return 1
    return 0


class _PullTasks:
    """One progress line per dataset being pulled, counting its records as they come: what
    its source reads (a root's ingest, given to the pipeline as this ``Progress``) or its
    transactions commit; what it is doing meanwhile (reading a file, starting an engine) is
    the line's phase. Fetches (bytes) keep lines of their own."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.tasks: dict[str, ProgressTask] = {}
        self.current: str | None = None
        self.counted: set[str] = set()

    def task(self, description: str, *, total: int | None = None, unit: str = "B") -> ProgressTask:
        if self.current in self.tasks and unit in ("records", ""):
            return _Phase(self, self.current, description, counts=bool(unit))
        return self.progress.task(description, total=total, unit=unit)

    def update(self, event: events.PullEvent) -> None:
        match event:
            case events.PullStarted(name):
                self.tasks[name] = self.progress.task(f"pull {name}", unit="records")
                self.current = name
            case events.TransactionCommitted() if event.dataset in self.tasks:
                self.tasks[event.dataset].advance(event.output_records)
            case events.RootPulled(name, result) if name in self.tasks:
                if name not in self.counted:
                    self.tasks[name].advance(result.num_records)
                _set_phase(self.tasks[name], "")
            case events.DerivativeDone(name) | events.PullFailed(name) if name in self.tasks:
                self.tasks.pop(name).close()

    def close(self) -> None:
        for task in self.tasks.values():
            task.close()
        self.tasks.clear()


class _Phase:
    """A task of the pipeline shown on its dataset's line: its description as the phase,
    its records (``counts``) added to the dataset's."""

    def __init__(self, tasks: _PullTasks, dataset: str, description: str, *, counts: bool) -> None:
        self.line = tasks.tasks[dataset]
        self.counts = counts
        if counts:
            tasks.counted.add(dataset)
        if description.startswith("ingest "):  # ingest /path/or/url/day-1.csv
            description = "reading " + description.rsplit("/", 1)[-1]
        _set_phase(self.line, description)

    def advance(self, amount: int) -> None:
        if self.counts:
            self.line.advance(amount)

    def close(self) -> None:
        _set_phase(self.line, "writing ..." if self.counts else "")  # then the commit


def _set_phase(task: ProgressTask, text: str) -> None:
    phase = getattr(task, "phase", None)  # the terminal's tasks have one
    if phase is not None:
        phase(text)


def describe_pull_event(event: events.PullEvent) -> str:
    match event:
        case events.RootPulled(_, result):
            from coordinator.cli.ingest import describe  # the ingest code: only for roots

            return describe(result, "the polling source")
        case events.TransactionCommitted():
            return describe_transaction(event)
        case events.DerivativeDone(name, reason):
            return f"{name}: {reason}"
        case events.PullFailed(name, error):
            return f"{name}: FAILED: {error}"
        case events.PullStarted(name):
            return f"{name}: pulling"


def describe_transaction(t: events.TransactionCommitted) -> str:
    data = t.event.new_data
    if data is None:
        records = "no new records"
    else:
        o = data.offset_interval
        records = f"{plural(t.output_records, 'record')} (offsets {o.start}..{o.end})"
    mark = t.event.new_watermark
    watermark = human_time(mark) if mark else "none"
    return (
        f"{t.dataset}: {records} from {plural(t.input_records, 'input record')},"
        f" watermark {watermark} (head {t.head})"
    )
