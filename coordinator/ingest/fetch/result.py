"""What a fetch step produces."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from coordinator.ingest.source_state import PollingSourceState


@dataclass(frozen=True, slots=True, kw_only=True)
class Fetched:
    """New data: a local file (possibly empty), the source state to record, and more."""

    path: Path
    """The fetched bytes; the source file itself for local files (no copy)."""
    name: str
    """How the data is called in errors: a file name or URL."""
    source_state: PollingSourceState | None
    source_event_time: datetime | None
    """The fallback event time; None means the ingest's system time."""
    has_more: bool = False
    """More data waits at the source (FilesGlob with more files, Container said so)."""


@dataclass(frozen=True, slots=True)
class UpToDate:
    """The source has not changed since the recorded state."""


FetchResult = Fetched | UpToDate
