"""Data files hashed on a cluster's executors for ``odf verify`` (HashDataFiles, an extension).

With ``engine.master`` a standalone cluster (``spark://...``) and the embedded engine, the
integrity check asks the engine to hash a dataset's data files in its tasks, on the executors
(``engine_spark/file_hashes.py``), instead of reading every byte on the coordinator. The
executors run the coordinator's own code (``common.hashing.data_file.inspect_data_file``);
their answers become the same ``FileFacts`` and are judged by the same code
(``files.data_slice_problems``), so a mismatch is reported in the same words, naming the
block and the file.

Files go in calls of ``BATCH`` paths. A file missing here is not sent (reported missing as
today). The coordinator hashes a file itself when the engine could not: the executors cannot
read it (its answer names why), the call failed, the answer breaks the contract (not one
answer per path, in order, with parseable hashes), or the engine has no HashDataFiles
(``UNIMPLEMENTED``: remembered, as for split transactions) or does not start.
"""

from __future__ import annotations

import stat
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from common.hashing.data_file import FileFacts
from common.logs import get_logger
from common.odf import engine_protocol as ep
from common.odf.errors import OdfError
from common.odf.multihash import Multihash
from coordinator.engine.errors import EngineContractError, EngineUnimplementedError
from coordinator.verify.files import data_file_facts, data_file_rel

log = get_logger(__name__)

BATCH = 512
"""Paths per call (the engine takes at most ``ep.MAX_HASHED_FILES``): one Spark job each."""
CLUSTER_MASTER_PREFIX = "spark://"


def hashes_on_executors(master: str, provider_kind: str) -> bool:
    """Whether ``odf verify`` asks the engine's executors for the data files' hashes: the
    embedded engine driving a standalone cluster (module doc); any other master or provider
    hashes on the coordinator, as before."""
    return provider_kind == "embedded" and master.startswith(CLUSTER_MASTER_PREFIX)


class FileHashingEngine(Protocol):
    """An engine client that can be asked for HashDataFiles."""

    description: str

    def hash_data_files(
        self, request: ep.HashDataFilesRequest
    ) -> ep.HashDataFilesResponseSuccess: ...


@dataclass(eq=False)
class EngineHashes:
    """The data files' facts from the engine's executors (module doc); ``engine`` is called
    (the engine started) on the first file to hash."""

    engine: Callable[[], FileHashingEngine]
    min_bytes: int = 0
    """A dataset whose data files hold fewer bytes is hashed here (``verify.executorMinBytes``:
    a Spark job, let alone the engine's start, costs more than hashing them here)."""
    _unavailable: str | None = field(default=None, init=False)

    def facts(self, root: Path, hashes: Sequence[Multihash]) -> dict[Multihash, FileFacts]:
        """The facts of ``data/<hash>`` under ``root`` for each of ``hashes``; files the
        executors did not hash are not in the answer (the caller hashes them)."""
        sizes = _regular_file_sizes(root, hashes)
        present = list(sizes)
        found: dict[Multihash, FileFacts] = {}
        size = sum(sizes.values())
        if size < self.min_bytes:
            log.info(
                "verify.hashed_here",
                root=str(root),
                bytes=size,
                reason="below verify.executorMinBytes",
            )
            return found
        started = time.monotonic()
        where: set[str] = set()
        tasks = 0
        for i in range(0, len(present), BATCH):
            batch = present[i : i + BATCH]
            answer = self._ask(root, batch)
            if answer is None:
                break
            tasks += answer.tasks
            for h, got in zip(batch, answer.files, strict=True):
                if got.error is not None:
                    log.info("verify.hashed_here", file=data_file_rel(h), reason=got.error)
                    continue
                found[h] = _facts(h, got)
                where.add(got.hashed_by or "?")
        if found:
            log.info(
                "verify.hashed_by_engine",
                root=str(root),
                files=len(found),
                of=len(present),
                tasks=tasks,
                where=sorted(where),
                seconds=round(time.monotonic() - started, 3),
            )
        return found

    def _ask(
        self, root: Path, batch: Sequence[Multihash]
    ) -> ep.HashDataFilesResponseSuccess | None:
        """The engine's answer for ``batch``, checked; ``None``: hash here (logged why)."""
        if self._unavailable is not None:
            return None
        try:
            engine = self.engine()
            request = ep.HashDataFilesRequest(
                data_paths=tuple(str(root / data_file_rel(h)) for h in batch)
            )
            answer = engine.hash_data_files(request)
            _check(request, answer)
        except EngineUnimplementedError as e:
            self._unavailable = str(e)
            log.info("verify.hashed_here", reason=self._unavailable)
            return None
        except OdfError as e:  # failed to start, the call failed, or a broken answer
            log.warning("verify.hashed_here", reason=str(e))
            return None
        return answer


def _regular_file_sizes(root: Path, hashes: Sequence[Multihash]) -> dict[Multihash, int]:
    """The size of each of the data files ``hashes`` that is a regular file here, in order,
    from one ``stat`` each (a missing one is left to the caller: reported missing)."""
    sizes: dict[Multihash, int] = {}
    for h in dict.fromkeys(hashes):
        try:
            info = (root / data_file_rel(h)).stat()
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode):
            sizes[h] = info.st_size
    return sizes


def _check(request: ep.HashDataFilesRequest, answer: ep.HashDataFilesResponseSuccess) -> None:
    """Raise ``EngineContractError`` unless ``answer`` has one well-formed answer per path of
    ``request``, in order."""
    paths = [f.data_path for f in answer.files]
    if paths != list(request.data_paths):
        raise EngineContractError(
            f"HashDataFiles answered for {len(paths)} paths, not the {len(request.data_paths)}"
            " asked, in order"
        )
    for got in answer.files:
        if got.error is not None:
            continue
        try:
            Multihash.from_multibase(got.physical_hash or "")
            if got.logical_hash is not None:
                Multihash.from_multibase(got.logical_hash)
        except OdfError as e:
            raise EngineContractError(f"HashDataFiles: {got.data_path}: bad hash: {e}") from None
        if got.unreadable is None and (got.logical_hash is None or got.columns is None):
            raise EngineContractError(
                f"HashDataFiles: {got.data_path}: no logical hash or columns, nor why not"
            )


def _facts(physical_hash: Multihash, got: ep.DataFileHashes) -> FileFacts:
    """``FileFacts`` as ``data_file_facts`` would give them, from the engine's answer."""
    unreadable = got.unreadable is not None
    return FileFacts(
        path=data_file_rel(physical_hash),
        size=got.size,
        physical_hash=Multihash.from_multibase(got.physical_hash or ""),
        logical_hash=None if unreadable else Multihash.from_multibase(got.logical_hash or ""),
        records=None if unreadable else got.num_records,
        columns=(None if unreadable else tuple((c.name, c.arrow_type) for c in got.columns or ())),
        unreadable=got.unreadable,
        invalid_utf8=got.invalid_utf8,
        exposed_slots=got.exposed_slots,
    )


def data_facts_reader(
    hashes: EngineHashes | None, root: Path, wanted: Sequence[Multihash]
) -> Callable[[Path, Multihash], FileFacts]:
    """How ``integrity.file_problems`` reads a data file's facts: the executors' answer for
    ``wanted`` when ``hashes`` is given, else (and for what they did not hash) here."""
    if hashes is None:
        return data_file_facts
    known = hashes.facts(root, wanted)

    def read(root: Path, physical_hash: Multihash) -> FileFacts:
        got = known.get(physical_hash)
        return got if got is not None else data_file_facts(root, physical_hash)

    return read
