"""The embedded engine: ``python -m engine_spark`` as a child process of the coordinator.

It listens on a Unix socket in a private temporary directory only (no TCP port), so no
container runtime and no network are needed. The process is started once per command, is
ready when its health service reports SERVING (its SparkSession is up), gets SIGTERM at the
end (SIGKILL if it does not stop in time), and is killed by the kernel if the coordinator
dies first (``PR_SET_PDEATHSIG``), so a killed command leaves no engine behind.

It runs in its own session, so a Ctrl-C at the terminal reaches the coordinator alone: an
interrupted command kills the engine's whole process group (its JVM too) at once instead of
waiting for a graceful stop. Spark's and Python's scratch files go to the engine's temporary
directory (``SPARK_LOCAL_DIRS``, ``TMPDIR``), which is removed with it either way.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from common.logs import get_logger
from coordinator.config import DEFAULT_DRIVER_MEMORY
from coordinator.engine.errors import EngineUnavailableError, EngineVersionError
from coordinator.engine.provider import EngineMounts, jvm_environment, server_command
from coordinator.engine.version import (
    embedded_engine_version,
    embedded_engine_versions,
    engine_package_dir,
)
from coordinator.tempdirs import check_shared_dir, owned_temp_dir

if TYPE_CHECKING:
    from coordinator.engine.client import EngineClient

log = get_logger(__name__)

SOCKET_NAME = "engine.sock"
LOG_NAME = "engine.log"
SCRATCH_NAME = "scratch"
STOP_TIMEOUT_S = 30.0
KILL_TIMEOUT_S = 5.0
_PR_SET_PDEATHSIG = 1
_LOG_TAIL_CHARS = 1500
WARM_UP_ENV = "ODF_ENGINE_WARM_UP"
JIT_ENV = "ODF_ENGINE_JIT"
START_FAILED = "engine.start_failed"
"""What the engine server logs when its SparkSession cannot be built."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EmbeddedEngineProvider:
    master: str = "local[2]"
    driver_memory: str | None = DEFAULT_DRIVER_MEMORY
    start_timeout: float = 300.0
    data_roots: tuple[Path, ...] = ()
    """Directories served besides a command's mounts (a test run's temporary directory)."""
    shared_staging: Path | None = None
    """``engine.stagingDir``: passed as ``--shared-staging`` (and a data root); checked
    before the engine starts."""
    warm_up: bool = False
    """Run the engine's warm-up transaction before it serves: worth it for engines that
    serve many calls (the daemon's pool); a one-shot command starts ~2-3 s sooner without.
    ``ODF_ENGINE_WARM_UP`` in the environment (``on``/``off``) overrides it."""
    quick_jit: bool = False
    """The engine's JVM with C1 only (``--jit quick``): for a one-shot query (``odf sql``),
    whose start-up is most of its time; never for transactions, which run slower without
    C2. ``ODF_ENGINE_JIT`` in the environment (``full``/``quick``) overrides it."""

    @property
    def kind(self) -> str:
        return "embedded"

    def resolve_version(self) -> str:
        return embedded_engine_version()

    def check_version(self, version: str | None) -> None:
        if version is None:
            return
        own = embedded_engine_versions()
        if version not in own:
            raise EngineVersionError(
                f"the transform is pinned to engine {version!r}, but the embedded engine is"
                f" {' = '.join(sorted(own))!r}; run it with the engine it was pinned to"
                " (provider: container for an image digest)"
            )

    @contextmanager
    def engine(self, version: str | None, mounts: EngineMounts) -> Iterator[EngineClient]:
        self.check_version(version)
        if self.shared_staging is not None:
            check_shared_dir(self.shared_staging)
        # Locked while in use: the next command removes it if this one is killed.
        mounts = EngineMounts.of(mounts.read_only, (*mounts.read_write, *self.data_roots))
        mounts.create()
        with owned_temp_dir("odf-engine-") as workdir, self._process(workdir, mounts) as process:
            from coordinator.engine.client import EngineClient  # gRPC: only to start one

            client = EngineClient(
                f"unix:{workdir / SOCKET_NAME}",
                description=f"embedded engine (pid {process.pid})",
            )
            with client:
                try:
                    waited = client.wait_until_ready(
                        self.start_timeout, failed=lambda: _failed(process, workdir)
                    )
                except EngineUnavailableError as e:
                    raise EngineUnavailableError(f"{e}{_log_tail(workdir)}") from None
                log.info("engine.ready", provider="embedded", pid=process.pid, seconds=waited)
                yield client

    def command(self, workdir: Path, mounts: EngineMounts) -> list[str]:
        """The engine server's command line (the master reaches Spark unchanged)."""
        address = str(workdir / SOCKET_NAME)
        args = server_command(sys.executable, address, self.master, self.driver_memory, mounts)
        if self.shared_staging is not None:
            shared = str(self.shared_staging)
            args += ["--shared-staging", shared, "--data-root", shared]
        if WARM_UP_ENV not in os.environ:
            args += ["--warm-up", "on" if self.warm_up else "off"]
        if JIT_ENV not in os.environ:
            args += ["--jit", "quick" if self.quick_jit else "full"]
        return args

    @contextmanager
    def _process(self, workdir: Path, mounts: EngineMounts) -> Iterator[subprocess.Popen[bytes]]:
        args = self.command(workdir, mounts)
        source_root = engine_package_dir().parent
        path = os.pathsep.join(p for p in (str(source_root), os.environ.get("PYTHONPATH")) if p)
        scratch = workdir / SCRATCH_NAME
        scratch.mkdir()
        env = {
            **os.environ,
            "PYTHONPATH": path,
            "SPARK_LOCAL_DIRS": str(scratch),
            "TMPDIR": str(scratch),
            **jvm_environment(dict(os.environ)),
        }
        with open(workdir / LOG_NAME, "wb") as out:
            try:
                process = subprocess.Popen(
                    args,
                    cwd=workdir,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=out,
                    start_new_session=True,
                    preexec_fn=_die_with_parent,
                )
            except OSError as e:
                raise EngineUnavailableError(f"cannot start the embedded engine: {e}") from e
        log.info("engine.started", provider="embedded", pid=process.pid)
        try:
            yield process
        except KeyboardInterrupt:
            _kill(process)
            raise
        finally:
            _stop(process)


def _die_with_parent() -> None:
    """In the child: get SIGKILL when the coordinator dies (Linux; a no-op elsewhere)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _failed(process: subprocess.Popen[bytes], workdir: Path) -> str | None:
    """Why the engine cannot become ready: it exited, or its Spark session failed to start."""
    if process.poll() is not None:
        return f"exited with code {process.returncode} before it was ready"
    if START_FAILED in _read_log(workdir):
        return "failed to start"
    return None


def _read_log(workdir: Path) -> str:
    try:
        return (workdir / LOG_NAME).read_text(errors="replace")
    except OSError:
        return ""


def _log_tail(workdir: Path) -> str:
    tail = _read_log(workdir)[-_LOG_TAIL_CHARS:]
    return f": {' '.join(tail.split())}" if tail.strip() else ""


def _kill(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the engine's process group (the engine and its JVM): the command was
    interrupted, and nothing the engine holds is worth waiting for."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    try:
        process.wait(KILL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        log.warning("engine.kill_timeout", pid=process.pid)
    log.info("engine.killed", provider="embedded", pid=process.pid)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        log.warning("engine.kill", pid=process.pid)
        process.kill()
        process.wait()
    log.info("engine.stopped", provider="embedded", pid=process.pid, code=process.returncode)
