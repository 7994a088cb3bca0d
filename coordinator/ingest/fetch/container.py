"""FetchStep::Container: run an OCI image and ingest what it writes to stdout.

The reference's conventions: stdout is the data (streamed byte for byte to a file), stderr is
kept in ``fetch.err.txt``, a non-zero exit fails the fetch. A host folder is mounted at
``/opt/odf/out``; the container may leave ``new-etag`` (taken verbatim as the ETag state),
``new-last-modified`` (RFC 3339; surrounding whitespace ignored, unlike the reference) and
``new-has-more-data`` (its presence means "call me again") there. Injected variables:
``ODF_ETAG``, ``ODF_LAST_MODIFIED``, ``ODF_NEW_ETAG_PATH``, ``ODF_NEW_LAST_MODIFIED_PATH``,
``ODF_NEW_HAS_MORE_DATA_PATH`` and ``ODF_BATCH_SIZE`` (default 10000). ``env`` entries with a
value set a variable, entries without one pass the host's variable through.

The container is unchanged ("up to date") when it wrote nothing and left the state as it was.
The fallback event time is the system time. ``command`` is the entrypoint as an argument list
(the reference joins it into one string, which only works for a single word).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

import docker
import docker.errors

from common.logs import get_logger
from common.odf.fragments import FetchStepContainer
from coordinator.ingest.errors import FetchError, ParameterError, ProcessError
from coordinator.ingest.fetch.result import Fetched, FetchResult, UpToDate
from coordinator.ingest.progress import NO_PROGRESS, Progress
from coordinator.ingest.source_state import (
    ETag,
    LastModified,
    PollingSourceState,
    format_rfc3339,
    parse_rfc3339,
)

log = get_logger(__name__)

OUT_DIR = "/opt/odf/out"
DEFAULT_BATCH_SIZE = 10000
FETCHED_FILE = "fetched.bin"
STDERR_FILE = "fetch.err.txt"

ClientFactory = Callable[[], docker.DockerClient]


def default_client() -> docker.DockerClient:
    """The project's container runtime (DOCKER_HOST, else Podman, else Docker)."""
    from coordinator.engine.container_runtime import connect

    return connect().client


def container_env(
    step: FetchStepContainer,
    prev: PollingSourceState | None,
    host_env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The container's environment: the step's ``env`` plus the ODF variables."""
    host = os.environ if host_env is None else host_env
    env: dict[str, str] = {}
    batch_size = DEFAULT_BATCH_SIZE
    for i, var in enumerate(step.env or ()):
        value = var.value
        if value is None:
            if var.name not in host:
                raise ParameterError(
                    f"environment variable {var.name} is not set on the host",
                    path=f"fetch.env[{i}]",
                )
            value = host[var.name]
        if var.name == "ODF_BATCH_SIZE":
            batch_size = _batch_size(value, f"fetch.env[{i}].value")
            continue
        env[var.name] = value
    env.update(
        ODF_ETAG=prev.value if isinstance(prev, ETag) else "",
        ODF_LAST_MODIFIED=format_rfc3339(prev.time) if isinstance(prev, LastModified) else "",
        ODF_NEW_ETAG_PATH=f"{OUT_DIR}/new-etag",
        ODF_NEW_LAST_MODIFIED_PATH=f"{OUT_DIR}/new-last-modified",
        ODF_NEW_HAS_MORE_DATA_PATH=f"{OUT_DIR}/new-has-more-data",
        ODF_BATCH_SIZE=str(batch_size),
    )
    return env


def _batch_size(value: str, field: str) -> int:
    if not value.isdigit():
        raise ParameterError(
            f"ODF_BATCH_SIZE must be a non-negative integer, got {value!r}", path=field
        )
    return int(value)


def fetch_container(
    step: FetchStepContainer,
    prev: PollingSourceState | None,
    work_dir: Path,
    *,
    client_factory: ClientFactory = default_client,
    progress: Progress = NO_PROGRESS,
) -> FetchResult:
    env = container_env(step, prev)
    target = work_dir / FETCHED_FILE
    with tempfile.TemporaryDirectory(prefix="fetch-", dir=work_dir) as private:
        # The image may run as any user, so the directory it writes to is world-writable; it
        # sits in a private (0700) directory, so on the host only the coordinator reaches it.
        out_dir = Path(private) / "out"
        out_dir.mkdir()
        os.chmod(out_dir, 0o777)
        exit_code = _run(step, env, out_dir, target, work_dir, client_factory, progress)
        if exit_code != 0:
            raise ProcessError(
                f"fetch container {step.image} exited with code {exit_code}"
                f"{_stderr_tail(work_dir / STDERR_FILE)}"
            )
        state = _new_state(out_dir)
        has_more = (out_dir / "new-has-more-data").exists()
    if target.stat().st_size == 0 and state == prev:
        return UpToDate()
    return Fetched(
        path=target,
        name=f"output of {step.image}",
        source_state=state,
        source_event_time=None,
        has_more=has_more,
    )


def _run(
    step: FetchStepContainer,
    env: dict[str, str],
    out_dir: Path,
    target: Path,
    work_dir: Path,
    client_factory: ClientFactory,
    progress: Progress,
) -> int:
    client = client_factory()
    try:
        _ensure_image(client, step.image)
        container = client.containers.create(
            step.image,
            command=list(step.args) if step.args else None,
            entrypoint=list(step.command) if step.command else None,
            environment=env,
            volumes={str(out_dir): {"bind": OUT_DIR, "mode": "rw"}},
        )
        try:
            stream = container.attach(stdout=True, stderr=False, stream=True, logs=True)
            container.start()
            task = progress.task(f"fetch from {step.image}", unit="B")
            with open(target, "wb") as out:
                for chunk in stream:
                    out.write(chunk)
                    task.advance(len(chunk))
            task.close()
            status = container.wait()
            (work_dir / STDERR_FILE).write_bytes(container.logs(stdout=False, stderr=True))
            return int(status.get("StatusCode", -1))
        finally:
            container.remove(force=True)
    except docker.errors.DockerException as e:
        raise FetchError(f"cannot run fetch container {step.image}: {e}") from None
    finally:
        client.close()


def _ensure_image(client: docker.DockerClient, image: str) -> None:
    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        log.info("pulling image", image=image)
        client.images.pull(image)


def _new_state(out_dir: Path) -> PollingSourceState | None:
    etag = out_dir / "new-etag"
    if etag.exists():
        return ETag(etag.read_text(encoding="utf-8"))
    last_modified = out_dir / "new-last-modified"
    if last_modified.exists():
        text = last_modified.read_text(encoding="utf-8").strip()
        try:
            return LastModified(parse_rfc3339(text))
        except ValueError:
            raise FetchError(
                f"the fetch container wrote an invalid new-last-modified {text!r}"
                " (expected RFC 3339)"
            ) from None
    return None


def _stderr_tail(path: Path) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except FileNotFoundError:
        return ""
    return f": {lines[-1]}" if lines else ""
