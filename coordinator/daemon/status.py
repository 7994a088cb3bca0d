"""``Status``: what the daemon is doing, as the message ``odf daemon status`` prints."""

from __future__ import annotations

import time
from datetime import datetime

from coordinator.daemon.activity import Activity
from coordinator.daemon.convert import timestamp
from coordinator.daemon.grpc_generated import coordinator_pb2 as pb
from coordinator.daemon.scheduler import Scheduler
from coordinator.engine import EnginePool


def daemon_status(
    started: datetime, scheduler: Scheduler, pool: EnginePool | None, activity: Activity
) -> pb.StatusResponse:
    now = time.monotonic()
    schedules = []
    for schedule, next_run in scheduler.schedules():
        last = scheduler.last_runs.get(schedule.dataset)
        schedules.append(
            pb.ScheduleStatus(
                dataset=schedule.dataset,
                when=schedule.text,
                last_run=timestamp(last[0]) if last else None,
                last_outcome=last[1] if last else "",
                next_run=timestamp(next_run),
            )
        )
    engines = [
        pb.EngineStatus(
            version=e.version,
            state="serving" if e.serving else "dead",
            leases=e.leases,
            idle_seconds=e.idle_seconds,
        )
        for e in (pool.engines() if pool is not None else [])
    ]
    calls = [
        pb.RunningCall(method=c.method, dataset=c.dataset, seconds=now - c.started)
        for c in activity.running()
        if c.method != "Status"
    ]
    return pb.StatusResponse(
        started=timestamp(started),
        queued=scheduler.pending,
        pulling=scheduler.busy or "",
        schedules=schedules,
        engines=engines,
        calls=calls,
    )
