"""A real writer process for the fault and concurrency tests of dataset commits.

Run as ``python -m tests.integration.coordinator.commit_driver MODE DATASET ...``:

- ``commit``: commit one batch. ``--kill-at M`` makes the process SIGKILL itself right before
  the M-th file-system operation of the commit (``os.open``, ``write``, ``fsync``, ``rename``,
  ``replace``, ``unlink``, ``mkdir``); ``--count-ops`` prints how many the commit made.
  ``--hold FILE`` prepares the batch from the current head, prints ``prepared``, waits until
  ``FILE`` exists and only then commits, printing ``committed B``, or ``conflict B`` and exiting
  with status 3: two writers held this way are forced to interleave.
- ``loop``: commit ``--batches`` batches one after another, printing ``ready`` first and
  ``committed B`` after each; on a conflict it retries (``--retry``) or prints
  ``conflict B`` and exits with status 3.

A batch ``B`` of ``--rows N`` records has ``city`` values ``b<B>-r<i>``, so a checker can
tell exactly which batches are in the dataset and whether any record is duplicated.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from common.hashing import physical_hash_file
from common.odf.events import AddData
from common.odf.fragments import DataSlice, OffsetInterval
from common.odf.multihash import ARROW0_SHA3_256, Multihash
from coordinator.dataset import ConflictError, Dataset
from tests.unit.coordinator.events import SCHEMA, T0

CONFLICT_EXIT = 3
COUNTED_OPS = ("open", "write", "fsync", "rename", "replace", "unlink", "mkdir")


class OpCounter:
    """Counts file-system operations; kills this process before operation ``kill_at``."""

    def __init__(self, kill_at: int | None) -> None:
        self.kill_at = kill_at
        self.count = 0
        self.active = False
        for name in COUNTED_OPS:
            setattr(os, name, self._wrap(getattr(os, name)))

    def _wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            if self.active:
                self.count += 1
                if self.count == self.kill_at:
                    os.kill(os.getpid(), signal.SIGKILL)
            return fn(*args, **kwargs)

        return counted


def batch_table(batch: int, rows: int, start: int) -> pa.Table:
    event_time = T0 + timedelta(hours=batch)
    return pa.table(
        {
            "offset": pa.array(range(start, start + rows), pa.int64()),
            "op": pa.array([0] * rows, pa.int32()),
            "system_time": pa.array([T0] * rows, pa.timestamp("ms", tz="UTC")),
            "event_time": pa.array([event_time] * rows, pa.timestamp("ms", tz="UTC")),
            "city": pa.array([f"b{batch}-r{i}" for i in range(rows)]),
            "population": pa.array([batch] * rows, pa.int64()),
        },
        schema=SCHEMA,
    )


def wait_for(path: Path) -> None:
    while not path.exists():
        time.sleep(0.001)


def commit_batch(
    ds: Dataset,
    batch: int,
    rows: int,
    counter: OpCounter | None = None,
    before_commit: Callable[[], None] | None = None,
) -> None:
    """Prepare a batch from the current head and commit it (may raise ConflictError).

    ``before_commit`` runs between the two: after the head was read and the data staged.
    """
    state = ds.state()
    with ds.staging_dir() as staging:
        path = staging / "data"
        pq.write_table(batch_table(batch, rows, state.next_offset), path)
        size = path.stat().st_size
        new_data = DataSlice(
            logical_hash=Multihash(ARROW0_SHA3_256, batch.to_bytes(32, "little")),
            physical_hash=physical_hash_file(path),
            offset_interval=OffsetInterval(
                start=state.next_offset, end=state.next_offset + rows - 1
            ),
            size=size,
        )
        watermark = T0 + timedelta(hours=batch)
        if state.last_watermark is not None:
            watermark = max(watermark, state.last_watermark)
        event = AddData(prev_offset=state.last_offset, new_data=new_data, new_watermark=watermark)
        if before_commit is not None:
            before_commit()
        if counter is not None:
            counter.active = True
        ds.commit(event, data_file=path, expected_head=state.head)
        if counter is not None:
            counter.active = False


def run_commit(args: argparse.Namespace) -> int:
    counter = OpCounter(args.kill_at)
    ds = Dataset(Path(args.dataset))
    if args.hold is None:
        commit_batch(ds, args.batch, args.rows, counter)
    else:

        def hold() -> None:
            print("prepared", flush=True)
            wait_for(Path(args.hold))

        try:
            commit_batch(ds, args.batch, args.rows, counter, before_commit=hold)
        except ConflictError:
            print(f"conflict {args.batch}", flush=True)
            return CONFLICT_EXIT
        print(f"committed {args.batch}", flush=True)
    if args.count_ops:
        print(counter.count)
    return 0


def run_loop(args: argparse.Namespace) -> int:
    ds = Dataset(Path(args.dataset))
    print("ready", flush=True)
    if args.barrier:
        wait_for(Path(args.barrier))
    for batch in range(args.first_batch, args.first_batch + args.batches):
        while True:
            try:
                commit_batch(ds, batch, args.rows)
                break
            except ConflictError:
                if not args.retry:
                    print(f"conflict {batch}", flush=True)
                    return CONFLICT_EXIT
        print(f"committed {batch}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    modes = parser.add_subparsers(dest="mode", required=True)
    p = modes.add_parser("commit")
    p.add_argument("dataset")
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--rows", type=int, default=3)
    p.add_argument("--kill-at", type=int)
    p.add_argument("--count-ops", action="store_true")
    p.add_argument("--hold")
    p.set_defaults(run=run_commit)
    p = modes.add_parser("loop")
    p.add_argument("dataset")
    p.add_argument("--first-batch", type=int, required=True)
    p.add_argument("--batches", type=int, required=True)
    p.add_argument("--rows", type=int, default=3)
    p.add_argument("--retry", action="store_true")
    p.add_argument("--barrier")
    p.set_defaults(run=run_loop)
    args = parser.parse_args(argv)
    result: int = args.run(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
