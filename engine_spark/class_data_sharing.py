"""An application class-data sharing (CDS) archive for the engine's driver JVM.

Most of a one-shot engine start is the JVM loading and verifying Spark's classes. JDK 17
can write the classes a run loaded into a dynamic archive when the JVM exits
(``-XX:ArchiveClassesAtExit``); later JVMs map it (``-XX:SharedArchiveFile``) and start
about a third faster (``bench/bench_start.py``).

The archive lives in a per-user cache directory (``$XDG_CACHE_HOME/odf/cds``, else
``~/.cache/odf/cds``), named by a key over everything that makes an archive unusable: the
JDK (its home, ``release`` file and ``libjvm.so``), the classpath's jars (names, sizes,
modification times) and the JVM's options. A run that finds no archive for its key has its
JVM write one under a temporary name as it exits; a detached process (``settle``) renames it
into place, with its size in the name, once the JVM exited and logged that it wrote it whole,
so no command waits for it, and a crashed or killed run never leaves a half archive in use
(a truncated archive crashes the JVM: SIGBUS). The JVM still checks every archive it maps
and, with ``-Xshare:auto``, runs without one it cannot use; its CDS log lines are turned off.

``ODF_ENGINE_CDS=off`` turns it off. This module's first half is pure (keys, names, plans);
``prepare``, ``hand_over`` and ``settle`` do the process and file system work.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

import structlog

from common.processes import pid_alive

log = structlog.get_logger("engine_spark.cds")

CDS_ENV = "ODF_ENGINE_CDS"
ARCHIVE_SUFFIX = ".jsa"
TEMP_SUFFIX = ".tmp"
LOG_TEMP_SUFFIX = "-log.tmp"
QUIET = "-Xlog:cds=off,cds+dynamic=off"
"""No CDS warnings (an archive the JVM cannot use, classes it skips while dumping)."""
OPTION_ENVS = ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "SPARK_SUBMIT_OPTS")
"""Environment variables whose JVM options reach the driver JVM: part of the key."""
UNUSED_DAYS = 7
SETTLE_TIMEOUT_S = 600.0
"""How long ``settle`` waits for the JVM to write the archive and exit."""
STALE_AFTER_S = 600.0
"""A temporary file of a process that is gone, untouched this long, is a killed run's."""
WRITTEN = "Written dynamic archive"
"""What the JVM logs (``cds+dynamic`` at info) once the whole archive is written."""


class Mode(enum.Enum):
    USE = "use"
    CREATE = "create"


@dataclass(frozen=True, slots=True)
class ArchivePlan:
    """What the driver JVM does with the archive of its key."""

    mode: Mode
    path: Path
    """USE: the archive to map; CREATE: the temporary file the JVM writes at exit."""
    directory: Path
    key: str

    @property
    def log_path(self) -> Path:
        """CREATE: the JVM's CDS log (only it says whether the archive was written whole)."""
        return self.path.with_name(self.path.name.removesuffix(TEMP_SUFFIX) + LOG_TEMP_SUFFIX)

    def jvm_options(self) -> tuple[str, ...]:
        if self.mode is Mode.USE:
            return (f"-XX:SharedArchiveFile={self.path}", "-Xshare:auto", QUIET)
        return (
            f"-XX:ArchiveClassesAtExit={self.path}",
            QUIET,
            f"-Xlog:cds+dynamic=info:file={self.log_path}",
        )


@dataclass(frozen=True, slots=True)
class FileStamp:
    name: str
    size: int
    mtime_ns: int


@dataclass(frozen=True, slots=True)
class ArchiveInputs:
    """Everything an archive depends on: if any of it changes, the key does."""

    java_home: str
    jdk_release: str
    jvm_library: FileStamp | None
    jars: tuple[FileStamp, ...]
    options: tuple[str, ...]


# --- pure -----------------------------------------------------------------------------------


def archive_key(inputs: ArchiveInputs) -> str:
    """A hex digest over the inputs (sorted jars: the order a directory lists them in is not
    part of what the JVM checks)."""
    canonical = {
        "java_home": inputs.java_home,
        "jdk_release": inputs.jdk_release,
        "jvm_library": _stamp(inputs.jvm_library) if inputs.jvm_library else None,
        "jars": [_stamp(jar) for jar in sorted(inputs.jars, key=lambda j: j.name)],
        "options": list(inputs.options),
    }
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _stamp(stamp: FileStamp) -> list[object]:
    return [stamp.name, stamp.size, stamp.mtime_ns]


def cache_directory(env: Mapping[str, str], home: Path) -> Path:
    """``$XDG_CACHE_HOME/odf/cds`` (an absolute XDG_CACHE_HOME only, as the XDG spec says),
    else ``HOME/.cache/odf/cds``."""
    xdg = env.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else home / ".cache"
    return base / "odf" / "cds"


def archive_name(key: str, size: int) -> str:
    return f"{key}-{size}{ARCHIVE_SUFFIX}"


def temp_name(key: str, pid: int, token: str) -> str:
    return f"{key}.{pid}.{token}{TEMP_SUFFIX}"


def find_archive(key: str, entries: Iterable[tuple[str, int]]) -> str | None:
    """The complete archive of ``key`` among ``(name, size)`` entries: its name carries its
    size, so a truncated or overwritten file is not taken."""
    for name, size in entries:
        if name == archive_name(key, size):
            return name
    return None


def stale_temps(
    entries: Iterable[tuple[str, float]], alive: Callable[[int], bool], now: float
) -> list[str]:
    """Temporary files (archives, logs) left by killed runs: their process is gone and they
    were not written to for ``STALE_AFTER_S`` (a JVM still writing one after its engine
    exited keeps it fresh)."""
    stale = []
    for name, mtime in entries:
        if not name.endswith(TEMP_SUFFIX) or mtime > now - STALE_AFTER_S:
            continue
        parts = name.split(".")
        if len(parts) != 4 or not parts[1].isdigit() or not alive(int(parts[1])):
            stale.append(name)
    return stale


def superseded(key: str, entries: Iterable[tuple[str, float]], now: float) -> list[str]:
    """Archives of other keys (an older JDK, Spark or other options) unused for
    ``UNUSED_DAYS`` (a start touches the archive it maps): removed when a new one is written,
    so upgrades do not pile up archives, and engines with different options on one machine
    (a daemon's, a command's) keep one each instead of replacing each other's."""
    oldest = now - UNUSED_DAYS * 86400
    return [
        name
        for name, mtime in entries
        if name.endswith(ARCHIVE_SUFFIX) and not name.startswith(f"{key}-") and mtime < oldest
    ]


def plan_for(
    key: str, directory: Path, entries: Iterable[tuple[str, int]], pid: int, token: str
) -> ArchivePlan:
    found = find_archive(key, entries)
    if found is not None:
        return ArchivePlan(Mode.USE, directory / found, directory, key)
    return ArchivePlan(Mode.CREATE, directory / temp_name(key, pid, token), directory, key)


def strip_archive_options(options: str) -> str:
    """JVM options without CDS archive options (which are not part of the key)."""
    kept = [
        o
        for o in options.split()
        if not o.startswith(("-XX:SharedArchiveFile=", "-XX:ArchiveClassesAtExit=", "-Xshare:"))
        and o != QUIET
    ]
    return " ".join(kept)


# --- I/O ------------------------------------------------------------------------------------


def java_home(env: Mapping[str, str]) -> Path | None:
    """The JDK Spark's launcher runs: ``$JAVA_HOME``, else the ``java`` on the PATH."""
    if env.get("JAVA_HOME"):
        java = Path(env["JAVA_HOME"]) / "bin" / "java"
    else:
        found = shutil.which("java", path=env.get("PATH"))
        if found is None:
            return None
        java = Path(found)
    try:
        return java.resolve(strict=True).parent.parent
    except OSError:
        return None


def spark_home(env: Mapping[str, str]) -> Path | None:
    """Where Spark's jars are: ``$SPARK_HOME``, else the pyspark package (not imported)."""
    if env.get("SPARK_HOME"):
        return Path(env["SPARK_HOME"])
    spec = find_spec("pyspark")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent


def gather_inputs(env: Mapping[str, str], options: Sequence[str]) -> ArchiveInputs | None:
    """The key's inputs on this machine; None if the JDK or Spark's jars are not found."""
    jdk, spark = java_home(env), spark_home(env)
    if jdk is None or spark is None or not (spark / "jars").is_dir():
        return None
    try:
        release = (jdk / "release").read_text(errors="replace")
    except OSError:
        release = ""
    library = next(
        (s for s in (_file_stamp(p) for p in (jdk / "lib").glob("*/libjvm.so")) if s), None
    )
    jars = tuple(s for s in (_file_stamp(p) for p in (spark / "jars").glob("*.jar")) if s)
    env_options = tuple(f"{name}={env.get(name, '')}" for name in OPTION_ENVS)
    return ArchiveInputs(
        java_home=str(jdk),
        jdk_release=release,
        jvm_library=library,
        jars=jars,
        options=(*options, *env_options),
    )


def _file_stamp(path: Path) -> FileStamp | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return FileStamp(path.name, st.st_size, st.st_mtime_ns)


def prepare(env: Mapping[str, str], options: Sequence[str]) -> ArchivePlan | None:
    """The plan for this start, or None: no JDK or Spark jars found, or no usable cache
    directory (the engine then starts without; nothing here ever fails the engine)."""
    inputs = gather_inputs(env, options)
    if inputs is None:
        log.debug("cds.unavailable", reason="no JDK or Spark jars found")
        return None
    directory = cache_directory(env, Path(env.get("HOME") or Path.home()))
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with os.scandir(directory) as it:
            stats = [(e.name, e.stat()) for e in it if e.is_file()]
    except OSError as e:
        log.debug("cds.unavailable", directory=str(directory), reason=str(e))
        return None
    entries = [(name, st.st_size) for name, st in stats]
    _remove(directory, stale_temps([(n, st.st_mtime) for n, st in stats], pid_alive, time.time()))
    plan = plan_for(archive_key(inputs), directory, entries, os.getpid(), secrets.token_hex(4))
    if plan.mode is Mode.USE:
        with contextlib.suppress(OSError):
            os.utime(plan.path)  # in use: not pruned as unused
    log.info("cds.plan", mode=plan.mode.value, archive=str(plan.path))
    return plan


def hand_over(plan: ArchivePlan, jvm: subprocess.Popen[bytes] | None) -> None:
    """At the engine's stop: leave the archive to a detached process (``settle``), so neither
    the engine nor the command that started it waits while the JVM writes it (~110-170 MB:
    seconds, or a minute on a loaded machine). The JVM writes it once this process has
    exited (its stdin closes: PySpark's gateway then exits the JVM)."""
    if plan.mode is not Mode.CREATE or jvm is None:
        return
    args = [sys.executable, "-m", __name__, str(jvm.pid), str(plan.path), plan.key]
    try:
        subprocess.Popen(
            args,
            cwd="/",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as e:
        log.warning("cds.not_written", reason=f"cannot start its settler: {e}")


def settle(plan: ArchivePlan, jvm_pid: int, timeout: float = SETTLE_TIMEOUT_S) -> Path | None:
    """Wait until the JVM exited, then rename its archive into place if the JVM logged that
    it was written whole; else remove what it left. Returns the archive's path, or None."""
    deadline = time.monotonic() + timeout
    while pid_alive(jvm_pid):
        if time.monotonic() > deadline:
            log.warning("cds.not_written", reason="the JVM did not exit")
            _remove(plan.directory, [plan.path.name, plan.log_path.name])
            return None
        time.sleep(0.1)
    try:
        written = WRITTEN in plan.log_path.read_text(errors="replace")
        size = plan.path.stat().st_size
    except OSError:
        written, size = False, 0
    if not written or size == 0:
        log.warning("cds.not_written", size=size)
        _remove(plan.directory, [plan.path.name, plan.log_path.name])
        return None
    final = plan.directory / archive_name(plan.key, size)
    os.replace(plan.path, final)
    _remove(plan.directory, [plan.log_path.name])
    with os.scandir(plan.directory) as it:
        entries = [(e.name, e.stat().st_mtime) for e in it]
    _remove(plan.directory, superseded(plan.key, entries, time.time()))
    log.info("cds.written", archive=str(final), size=size)
    return final


def discard(plan: ArchivePlan) -> None:
    """The JVM could not start with this archive: remove it, so the next start writes a new
    one (the JVM rejects unusable archives itself; this is for one that crashed it)."""
    _remove(plan.directory, [plan.path.name])
    log.warning("cds.discarded", archive=str(plan.path))


def _remove(directory: Path, names: Iterable[str]) -> None:
    for name in names:
        with contextlib.suppress(OSError):
            (directory / name).unlink()


if __name__ == "__main__":  # the detached settler started by ``hand_over``
    _pid, _path, _key = sys.argv[1:4]
    _archive = Path(_path)
    settle(ArchivePlan(Mode.CREATE, _archive, _archive.parent, _key), int(_pid))
