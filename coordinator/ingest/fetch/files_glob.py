"""FetchStep::FilesGlob: one file per iteration, in file-name order.

As in the reference: the glob (relative to the working directory; ``*`` also matches dot
files) is expanded to regular files keyed by file name; only names after the recorded one (the
state is an ETag holding the last file name) are candidates, and the first one is fetched,
with ``has_more`` when others remain. Files already ingested, or appearing later with a
smaller name, are never read again; a rewritten file is not noticed.

Event time: ``FromPath`` parses the file name; ``FromMetadata`` uses the file's modification
time (the reference rejects it); unset or ``FromSystemTime`` uses the system time.
"""

from __future__ import annotations

import glob
from datetime import UTC, datetime, timedelta
from pathlib import Path

from common.odf.fragments import FetchStepFilesGlob, SourceOrdering
from coordinator.ingest.errors import FetchError, SourceNotFoundError
from coordinator.ingest.event_time import fallback_event_time
from coordinator.ingest.fetch.result import Fetched, FetchResult, UpToDate
from coordinator.ingest.source_state import ETag, PollingSourceState


def fetch_files_glob(step: FetchStepFilesGlob, prev: PollingSourceState | None) -> FetchResult:
    if step.order is SourceOrdering.BY_EVENT_TIME:
        raise FetchError("FilesGlob order ByEventTime is not supported: use ByName")
    last = prev.value if isinstance(prev, ETag) else None
    files: dict[str, Path] = {}
    for match in sorted(glob.glob(step.path, include_hidden=True)):
        path = Path(match)
        if path.is_file():
            files.setdefault(path.name, path)
    candidates = sorted(name for name in files if last is None or name > last)
    if not candidates:
        if prev is not None:
            return UpToDate()
        raise SourceNotFoundError(f"no file matches {step.path!r}")
    name = candidates[0]
    path = files[name]
    event_time = None
    if step.event_time is not None:
        event_time = fallback_event_time(step.event_time, name=name, modified=file_mtime(path))
    return Fetched(
        path=path,
        name=str(path),
        source_state=ETag(name),
        source_event_time=event_time,
        has_more=len(candidates) > 1,
    )


def file_mtime(path: Path) -> datetime:
    """The modification time rounded to milliseconds, as the reference records it."""
    millis = (path.stat().st_mtime_ns + 500_000) // 1_000_000
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=millis)
