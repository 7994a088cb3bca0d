"""Fetch steps of polling sources: where the raw data comes from.

``fetch`` dispatches on the step kind and returns ``Fetched`` (a local file plus the source
state to record) or ``UpToDate``; a missing source raises ``SourceNotFoundError``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from common.odf.fragments import (
    FetchStep,
    FetchStepContainer,
    FetchStepFilesGlob,
    FetchStepMqtt,
    FetchStepUrl,
)
from coordinator.ingest.errors import FetchError
from coordinator.ingest.fetch.files_glob import fetch_files_glob
from coordinator.ingest.fetch.result import Fetched, FetchResult, UpToDate
from coordinator.ingest.progress import NO_PROGRESS, Progress
from coordinator.ingest.source_state import PollingSourceState

if TYPE_CHECKING:
    import docker

ClientFactory = Callable[[], "docker.DockerClient"]
"""How a ``Container`` fetch step gets its container runtime (tests give their own)."""


def default_client() -> docker.DockerClient:
    """The project's container runtime (imported only when a fetch step needs one)."""
    from coordinator.ingest.fetch.container import default_client as connect

    return connect()


__all__ = ["ClientFactory", "FetchResult", "Fetched", "UpToDate", "default_client", "fetch"]


def fetch(
    step: FetchStep,
    prev: PollingSourceState | None,
    work_dir: Path,
    *,
    progress: Progress = NO_PROGRESS,
    container_client: ClientFactory = default_client,
    mqtt_client_id: str | None = None,
) -> FetchResult:
    """Fetch new data for a source whose recorded state is ``prev``, into ``work_dir``."""
    match step:
        case FetchStepUrl():
            from coordinator.ingest.fetch.url import fetch_url  # requests, when needed

            return fetch_url(step, prev, work_dir, progress=progress)
        case FetchStepFilesGlob():
            return fetch_files_glob(step, prev)
        case FetchStepContainer():
            from coordinator.ingest.fetch.container import fetch_container  # docker SDK

            return fetch_container(
                step, prev, work_dir, client_factory=container_client, progress=progress
            )
        case FetchStepMqtt():
            from coordinator.ingest.fetch.mqtt import fetch_mqtt  # paho, when needed

            if mqtt_client_id is None:
                raise FetchError("FetchStep::Mqtt needs the dataset's client id")
            return fetch_mqtt(step, work_dir, client_id=mqtt_client_id)
