"""Where an engine call spends its time: named phases, each with its wall and CPU time.

``phase("analysis")`` around a step of a request adds that step's wall-clock time, this
process's CPU time and (when a recording asks for it) the driver JVM's CPU time to the
request's recording, and logs it at debug level (``engine.phase``: quiet by default). Phases
entered several times in one request (one per query step, one per output batch) add up. It
costs two clock reads when nothing records (a few microseconds: cheap enough for every
request).

``recording()`` collects the phases of the calls made inside it (the same thread, or the
threads it hands its context to): ``bench/bench_phases.py`` runs the engine in its own process
and reads them, so the breakdown is of the real code path, not of a copy of it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import structlog

log = structlog.get_logger("engine_spark.phases")


@dataclass(slots=True)
class Recording:
    """The phases of the calls made inside ``recording()``, in the order first entered: each
    one's seconds of wall-clock time, of this process's CPU time (the driver side of py4j,
    pyarrow, gRPC) and of the driver JVM's CPU time (all its threads, Spark's tasks too; 0
    unless recorded), summed over the times it was entered."""

    phases: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    jvm_cpu: Callable[[], float] | None = None

    def add(self, name: str, *seconds: float) -> None:
        known = self.phases.get(name, (0.0, 0.0, 0.0))
        self.phases[name] = (known[0] + seconds[0], known[1] + seconds[1], known[2] + seconds[2])


_current: ContextVar[Recording | None] = ContextVar("odf_engine_phases", default=None)


@contextmanager
def recording(jvm_pid: int | None = None) -> Iterator[Recording]:
    """Record the phases of what runs inside; with ``jvm_pid``, the JVM's CPU time too."""
    rec = Recording(jvm_cpu=(lambda: process_cpu(jvm_pid)) if jvm_pid is not None else None)
    token = _current.set(rec)
    try:
        yield rec
    finally:
        _current.reset(token)


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Time the body as phase ``name`` of the current request (see the module doc)."""
    rec = _current.get()
    jvm = rec.jvm_cpu if rec is not None else None
    jvm_start = jvm() if jvm is not None else 0.0
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        yield
    finally:
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        jvm_cpu = jvm() - jvm_start if jvm is not None else 0.0
        if rec is not None:
            rec.add(name, wall, cpu, jvm_cpu)
        log.debug("engine.phase", phase=name, wall_ms=round(wall * 1000, 2))


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_cpu(pid: int) -> float:
    """User plus system CPU seconds of process ``pid`` so far (Linux ``/proc``; 0 elsewhere).
    The kernel counts in clock ticks (10 ms): meaningful summed over many calls."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS
