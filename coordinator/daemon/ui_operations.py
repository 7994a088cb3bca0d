"""What the web UI runs through the daemon (``ui.server.Operations``): pulls under the
datasets' locks with their commits counted and announced like the gRPC ``Pull``'s, queries in
the daemon's parallel slots, and verifications whose progress the UI streams."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from common.humanize import plural
from coordinator.app import (
    Application,
    DerivativeDone,
    PullFailed,
    PullOptions,
    PullStarted,
    QueryOptions,
    RootPulled,
    TransactionCommitted,
    VerifyOptions,
)
from coordinator.daemon.calls import DatasetLocks
from coordinator.daemon.metrics import Metrics
from coordinator.daemon.service import CoordinatorService
from coordinator.ui.server import Say

if TYPE_CHECKING:
    from coordinator.app.pull_events import PullEvent
    from coordinator.ingest.progress import ProgressTask
    from coordinator.query import QueryResult
    from coordinator.verify.replay import ReplayResult


class _SaidProgress:
    """A pull's progress as lines: each task (a fetch, a read, an engine start) once."""

    def __init__(self, say: Say) -> None:
        self.say = say

    def task(self, description: str, *, total: int | None = None, unit: str = "B") -> ProgressTask:
        del total, unit
        self.say(description)
        return _NoTask()


class _NoTask:
    def advance(self, amount: int) -> None:
        del amount

    def close(self) -> None:
        pass


def pull_line(event: PullEvent) -> str:
    """One line saying what a pull event means."""
    if isinstance(event, PullStarted):
        return f"{event.dataset}: pulling"
    if isinstance(event, RootPulled):
        r = event.result
        if r.up_to_date:
            return f"{event.dataset}: up to date"
        return f"{event.dataset}: {plural(r.num_records, 'record')} ingested"
    if isinstance(event, TransactionCommitted):
        return f"{event.dataset}: committed {plural(event.output_records, 'record')}"
    if isinstance(event, DerivativeDone):
        return f"{event.dataset}: {event.reason}"
    return f"{event.dataset}: {event.error}"


@dataclass(eq=False)
class DaemonOperations:
    app: Application
    locks: DatasetLocks
    metrics: Metrics
    service: CoordinatorService

    def pull(self, name: str, say: Say) -> bool:
        order = self.app.pull_order([name])
        ok = True
        with self.locks.hold([d.alias for d in order], "pull"), self.metrics.timed("pull"):
            for event in self.app.pull([name], PullOptions(progress=_SaidProgress(say))):
                self.service.pull_message(event)  # counted, and the scheduler told
                ok = ok and not isinstance(event, PullFailed)
                say(pull_line(event))
        return ok

    def verify(self, name: str, say: Say, on_bytes: Callable[[int], None]) -> tuple[bool, str]:
        def replayed(dataset: str, result: ReplayResult) -> None:
            outcome = result.error or ("; ".join(result.differences) or "reproduced")
            say(f"{dataset}: replayed {result.kind} {result.block}: {outcome}")

        with self.metrics.timed("verify"):
            reports = self.app.verify([name], VerifyOptions(on_replay=replayed, on_bytes=on_bytes))
        for report in reports:
            for problem in report.problems:
                say(f"{report.dataset}: {problem}")
        ok = all(r.ok for r in reports)
        blocks = sum(r.blocks for r in reports)
        problems = sum(len(r.problems) for r in reports)
        text = f"{plural(blocks, 'block')} checked" + (
            ": valid" if ok else f": {plural(problems, 'problem')}"
        )
        return ok, text

    def query(self, sql: str, limit: int | None) -> QueryResult:
        with self.locks.slots, self.metrics.timed("query"):
            return self.app.query(sql, QueryOptions(limit=limit))
