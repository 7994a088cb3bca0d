"""Stored data files hashed in the engine's tasks (HashDataFiles: ``odf verify`` on a cluster).

The paths are spread round-robin over at most ``TASKS_PER_CORE`` tasks per core of the
application (one file per task when they are fewer); each task inspects its files with
``common.hashing.data_file.inspect_data_file``, the very code the coordinator hashes with
(physical and logical hash, size, records, column types, UTF-8), where the task runs: on a
cluster an executor, which must reach the paths (the workspace on a filesystem every node
mounts at the same path). A file a task cannot read is answered with why, naming it; the
job does not fail for it. The driver collects one small answer per file, nothing else.

Each answer says where it was computed (``hashed_by``): ``executor <id> on <host>`` when the
task's process descends from an executor JVM, ``driver on <host>`` when from the driver's
(a local master), from the process tree under ``/proc`` (``pid <n> on <host>`` elsewhere).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Iterator, Sequence
from functools import cache
from pathlib import Path

from pyspark.sql import SparkSession

from common.hashing.data_file import inspect_data_file
from common.logs import configure_logging
from common.odf import engine_protocol as ep
from engine_spark.phases import phase

TASKS_PER_CORE = 4
"""Tasks per core when there are more files: small enough per-task overhead (tens of ms),
enough tasks that one large file does not hold back the others' cores."""
_ANCESTORS = 8


def hash_files(session: SparkSession, paths: Sequence[str]) -> tuple[list[ep.DataFileHashes], int]:
    """Each of ``paths`` inspected in the application's tasks (module doc), in order; and
    how many tasks did it."""
    if not paths:
        return [], 0
    context = session.sparkContext
    n = min(len(paths), max(1, context.defaultParallelism) * TASKS_PER_CORE)
    indexed = list(enumerate(paths))
    shares = [indexed[j::n] for j in range(n)]
    with phase("hash job"):
        answers = context.parallelize(shares, n).mapPartitions(_hash_share).collect()
    found = dict(answers)
    if sorted(found) != list(range(len(paths))):
        raise RuntimeError(f"the hash job answered {len(found)} of {len(paths)} files")
    return [found[i] for i in range(len(paths))], n


def _hash_share(
    shares: Iterable[list[tuple[int, str]]],
) -> Iterator[tuple[int, ep.DataFileHashes]]:
    """In a task: its files' answers."""
    configure_logging(0)  # the worker's own process: as quiet as the engine by default
    where = hashed_by()
    for share in shares:
        for index, path in share:
            yield index, _hash_one(path, where)


def _hash_one(path: str, where: str) -> ep.DataFileHashes:
    try:
        facts = inspect_data_file(path, path)
    except OSError as e:
        reason = e.strerror or str(e)
        return ep.DataFileHashes(data_path=path, error=f"cannot read {path}: {reason}")
    except Exception as e:  # one bad file is this file's answer, not the job's failure
        return ep.DataFileHashes(data_path=path, error=f"{type(e).__name__}: {e}")
    columns = None
    if facts.columns is not None:
        columns = tuple(ep.DataFileColumn(name=n, arrow_type=t) for n, t in facts.columns)
    return ep.DataFileHashes(
        data_path=path,
        size=facts.size or 0,
        physical_hash=str(facts.physical_hash),
        logical_hash=str(facts.logical_hash) if facts.logical_hash is not None else None,
        num_records=facts.records or 0,
        columns=columns,
        unreadable=facts.unreadable,
        invalid_utf8=facts.invalid_utf8,
        exposed_slots=facts.exposed_slots,
        hashed_by=where,
    )


@cache
def hashed_by() -> str:
    """Where this process runs (module doc)."""
    host = socket.gethostname()
    pid = os.getpid()
    for _ in range(_ANCESTORS):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        if any(a.endswith(b"ExecutorBackend") for a in args):
            executor = _after(args, b"--executor-id")
            return f"executor {executor} on {host}"
        if b"org.apache.spark.deploy.SparkSubmit" in args:
            return f"driver on {host}"
        pid = int(stat.rpartition(")")[2].split()[1])  # the parent's pid
        if pid <= 1:
            break
    return f"pid {os.getpid()} on {host}"


def _after(args: Sequence[bytes], flag: bytes) -> str:
    try:
        return args[args.index(flag) + 1].decode(errors="replace")
    except (ValueError, IndexError):
        return "?"
