"""The daemon's scheduler: datasets pulled without anyone asking.

- **Schedules** (``daemon.schedules`` in the workspace config): a dataset (a root with a polling
  source, or a derivative) is pulled every interval, or at the times of a cron line.
- **Lineage**: when a dataset's head moves (a commit by the daemon, or by any other process:
  heads are also scanned every ``tick`` seconds), every derivative that reads it is queued; once
  pulled, its own head moves and its dependents follow, so updates flow along the lineage. A
  derivative that appears (``odf add``) is queued for its first pull. ``daemon.followLineage:
  false`` turns this off (derivatives then wait for a pull or their schedule).
- **The queue** is a set (a dataset is queued once however many of its inputs moved) kept in
  ``.odf/run/queue.json`` with the heads last seen. Work runs inputs first: a dataset waits
  while anything upstream of it is still queued. A dataset leaves the queue only once its pull
  has finished, so a daemon killed with ``kill -9`` finds it there on restart and pulls it
  again; since each transaction is atomic and a pull resumes from what the chain records, the
  interrupted transaction is redone once and nothing is committed twice.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from common.logs import get_logger
from common.odf.errors import OdfError, ValidationError
from coordinator.app import Application, PullOptions, RootPulled, TransactionCommitted
from coordinator.config import Schedule
from coordinator.daemon.calls import DatasetLocks
from coordinator.daemon.metrics import Metrics
from coordinator.dataset import Dataset
from coordinator.dataset.provenance import provenance
from coordinator.transform.lineage import Lineage, closure

log = get_logger(__name__)

QUEUE_FILE = "queue.json"
DEFAULT_TICK_S = 1.0


@dataclass(slots=True)
class QueueState:
    """What survives a restart: datasets still to pull (in the order queued), heads seen."""

    pending: list[str] = field(default_factory=list)
    heads: dict[str, str] = field(default_factory=dict)

    def add(self, names: Iterable[str]) -> bool:
        added = False
        for name in names:
            if name not in self.pending:
                self.pending.append(name)
                added = True
        return added

    def to_json(self) -> str:
        return json.dumps({"pending": self.pending, "heads": self.heads}, indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> QueueState:
        value = json.loads(text)
        return cls(list(value.get("pending", [])), dict(value.get("heads", {})))


class DurableQueue:
    """``QueueState`` in a file, rewritten whole (rename) on every change."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.existed = path.exists()
        self.state = self._load()

    def _load(self) -> QueueState:
        try:
            return QueueState.from_json(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return QueueState()
        except (ValueError, AttributeError) as e:
            log.warning("scheduler.queue_unreadable", path=str(self.path), error=str(e))
            return QueueState()

    def save(self) -> None:
        partial = self.path.with_name(f".{self.path.name}.partial")
        partial.write_text(self.state.to_json() + "\n", encoding="utf-8")
        partial.replace(self.path)


@dataclass(slots=True)
class _Timer:
    schedule: Schedule
    due: float
    """``time.time()`` of the next run."""

    def advance(self, now: float) -> None:
        if self.schedule.interval is not None:
            self.due = now + self.schedule.interval
        else:
            self.due = next_cron_time(self.schedule, now)


def next_cron_time(schedule: Schedule, after: float) -> float:
    from croniter import croniter

    start = datetime.fromtimestamp(after, UTC)
    return float(croniter(schedule.cron, start).get_next(float))


class Scheduler:
    """Runs queued pulls one at a time in its own thread (see the module doc)."""

    def __init__(
        self,
        app: Application,
        locks: DatasetLocks,
        metrics: Metrics,
        run_dir: Path,
        *,
        tick: float = DEFAULT_TICK_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.app = app
        self.locks = locks
        self.metrics = metrics
        self.tick = tick
        self.clock = clock
        self.queue = DurableQueue(run_dir / QUEUE_FILE)
        now = clock()
        self.timers = [_Timer(s, now) for s in self._checked(app.config.daemon.schedules)]
        for timer in self.timers:
            timer.advance(now)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="odf-scheduler", daemon=True)
        self.busy: str | None = None
        """The dataset being pulled now."""
        self.last_runs: dict[str, tuple[datetime, str]] = {}
        """Per dataset, when its last pull by the scheduler ended and how."""

    def _checked(self, schedules: Iterable[Schedule]) -> list[Schedule]:
        """The schedules, each naming an existing dataset."""
        out = []
        for s in schedules:
            try:
                self.app.dataset(s.dataset)
            except OdfError:
                raise ValidationError(
                    f"no dataset {s.dataset!r} in this workspace",
                    path=f".odf/config.yaml: daemon.schedules.{s.dataset}",
                ) from None
            out.append(s)
        return out

    # --- life ------------------------------------------------------------------------------------

    def start(self) -> None:
        self._scan(first=not self.queue.existed)
        self._thread.start()

    def stop(self, timeout: float) -> bool:
        """Take no more work; wait up to ``timeout`` for the running pull. Whether it ended."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def notify(self, dataset: str) -> None:
        """A dataset's head moved (a commit of the daemon): look at once, not at the next tick."""
        self._wake.set()

    def schedules(self) -> list[tuple[Schedule, datetime]]:
        """Each schedule with the time of its next run."""
        return [(t.schedule, datetime.fromtimestamp(t.due, UTC)) for t in self.timers]

    @property
    def pending(self) -> list[str]:
        with self._lock:
            return list(self.queue.state.pending)

    # --- the loop --------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._scan(first=False)
                self._fire_timers()
                name = self._next()
            except Exception as e:  # a broken dataset must not stop the scheduler
                log.warning("scheduler.scan_failed", error=str(e))
                name = None
            if name is None:
                self._wake.wait(self.tick)
                self._wake.clear()
                continue
            self._pull(name)

    def _scan(self, *, first: bool) -> None:
        """Queue the dependents of every dataset whose head has moved since last seen. On the
        very first start nothing is queued: the heads seen then are the starting point."""
        datasets = self.app.ws.list_datasets()
        heads: dict[str, str] = {}
        for ds in datasets:
            head = _head(ds)
            if head is not None:
                heads[ds.alias] = head
        with self._lock:
            seen = self.queue.state.heads
            moved = {name for name, head in heads.items() if seen.get(name) != head}
            if not moved and heads.keys() == seen.keys():
                return
            new = {name for name in moved if name not in seen}
            follow = self.app.config.daemon.follow_lineage and not first
            dependents = _dependents(datasets, moved, new) if follow else []
            self.queue.state.heads = heads
            self.queue.state.pending = [p for p in self.queue.state.pending if p in heads]
            if self.queue.state.add(dependents):
                log.info("scheduler.queued", datasets=dependents, because=sorted(moved))
            self.queue.save()
            self.metrics.queue_depth.set(len(self.queue.state.pending))

    def _fire_timers(self) -> None:
        now = self.clock()
        due = [t for t in self.timers if t.due <= now]
        for timer in due:
            timer.advance(now)
        if not due:
            return
        with self._lock:
            if self.queue.state.add(t.schedule.dataset for t in due):
                log.info("scheduler.due", datasets=[t.schedule.dataset for t in due])
                self.queue.save()
            self.metrics.queue_depth.set(len(self.queue.state.pending))

    def _next(self) -> str | None:
        """The first queued dataset with nothing queued upstream of it."""
        with self._lock:
            pending = list(self.queue.state.pending)
        if not pending:
            return None
        lineage = Lineage.of(self.app.ws.list_datasets())
        queued = set(pending)
        for name in pending:
            if not (closure(name, lineage.upstream) & (queued - {name})):
                return name
        return pending[0]  # a cycle cannot be committed: just take the oldest

    def _count(self, event: object) -> int:
        """1 for a commit (counted in the metrics), else 0."""
        if isinstance(event, TransactionCommitted):
            self.metrics.transactions.inc()
            self.metrics.records.labels("transform").inc(event.output_records)
            return 1
        if isinstance(event, RootPulled) and not event.result.up_to_date:
            self.metrics.records.labels("ingest").inc(event.result.num_records)
            return 1
        return 0

    def _pull(self, name: str) -> None:
        self.busy = name
        started = time.monotonic()
        log.info("scheduler.pulling", dataset=name)
        try:
            with self.locks.hold([name], "scheduled pull"), self.metrics.timed("scheduled"):
                committed = 0
                for event in self.app.pull([name], PullOptions(fail_fast=True)):
                    committed += self._count(event)
            seconds = round(time.monotonic() - started, 3)
            log.info("scheduler.pulled", dataset=name, commits=committed, seconds=seconds)
            outcome = f"ok ({committed} commit{'' if committed == 1 else 's'})"
        except Exception as e:  # logged and counted; queued again when its inputs move
            log.warning("scheduler.pull_failed", dataset=name, error=str(e))
            outcome = f"failed: {' '.join(str(e).split())[:300]}"
        finally:
            self.busy = None
        self.last_runs[name] = (datetime.now(UTC), outcome)
        if self._stop.is_set():
            return  # interrupted by shutdown: stays queued, resumed on restart
        with self._lock:
            if name in self.queue.state.pending:
                self.queue.state.pending.remove(name)
            self.queue.save()
            self.metrics.queue_depth.set(len(self.queue.state.pending))


def _head(ds: Dataset) -> str | None:
    try:
        head = ds.head()
    except (OdfError, OSError):
        return None
    return head.to_multibase() if head is not None else None


def _dependents(datasets: list[Dataset], moved: set[str], new: set[str]) -> list[str]:
    """Derivatives reading a dataset that moved, and new derivatives (their first pull);
    never a clone (a replica changes only by syncing from its remote)."""
    lineage = Lineage.of(datasets)
    replicas = {d.alias for d in datasets if provenance(d.layout).clone_of is not None}
    return sorted(
        n.name
        for n in lineage.nodes
        if n.name not in replicas
        and (moved & set(lineage.upstream(n.name)) or (n.name in new and lineage.upstream(n.name)))
    )
