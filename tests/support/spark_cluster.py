"""A Spark standalone cluster on this machine: one Master and Workers from pip pyspark's
``spark-class``, as a user would start one (``spark://127.0.0.1:PORT``)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import pyspark

from tests.support.cli import REPO

START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 20.0
_RUNNING = re.compile(r"Running task \S+ in stage \S+ \(TID (\d+)\)")
_FINISHED = re.compile(r"Finished task \S+ in stage \S+ \(TID (\d+)\)")


@dataclass(frozen=True)
class SparkWorker:
    """One Worker daemon: its JVM leads a process group that also holds the executor JVMs it
    launched (Spark starts them without a new session)."""

    process: subprocess.Popen[bytes]
    work_dir: Path
    """Its ``--work-dir``: ``app-*/<executor id>/stderr`` are its executors' logs."""

    def kill(self) -> None:
        """``kill -9`` the Worker and its executors at once, as a crashed machine would."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def executor_logs(self) -> list[Path]:
        return sorted(self.work_dir.glob("app-*/*/stderr"))

    def running_tasks(self, earlier: frozenset[Path] = frozenset()) -> set[str]:
        """TIDs its executors started and have not finished (from their INFO logs; not those
        of the ``earlier`` logs: applications of earlier tests on a shared cluster)."""
        running: set[str] = set()
        for log in set(self.executor_logs()) - earlier:
            text = log.read_text(errors="replace")
            running |= set(_RUNNING.findall(text)) - set(_FINISHED.findall(text))
        return running

    def finished_tasks(self, earlier: frozenset[Path] = frozenset()) -> int:
        """How many tasks its executors finished (their INFO logs, not the ``earlier`` ones)."""
        logs = set(self.executor_logs()) - earlier
        return sum(len(_FINISHED.findall(log.read_text(errors="replace"))) for log in logs)

    def kill_executors(self) -> int:
        """``kill -9`` its executor JVMs only (the Worker stays): as an executor crashing or
        killed by the kernel would. Returns how many were killed."""
        killed = 0
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                if os.getpgid(int(proc.name)) != self.process.pid:
                    continue
                command = (proc / "cmdline").read_bytes()
            except (OSError, ProcessLookupError):
                continue  # gone meanwhile
            if b"CoarseGrainedExecutorBackend" in command:
                os.kill(int(proc.name), signal.SIGKILL)
                killed += 1
        return killed


@dataclass(frozen=True)
class SparkCluster:
    master_url: str
    conf_dir: Path
    """A SPARK_CONF_DIR whose spark-defaults.conf sizes executors to the Workers."""
    workers: tuple[SparkWorker, ...] = field(default=())
    master_log: Path | None = None

    def engine_env(self) -> dict[str, str]:
        """The environment of an engine driving this cluster (its executors run this Python)."""
        return {"SPARK_CONF_DIR": str(self.conf_dir), "PYSPARK_PYTHON": sys.executable}


def _python_path() -> str:
    return os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _daemon(args: list[str], log: Path, env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            ["bash", str(spark_class), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _wait_for(log: Path, text: str, count: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if log.exists() and log.read_text(errors="replace").count(text) >= count:
            return
        time.sleep(0.5)
    tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
    raise TimeoutError(f"{log.name}: no {count} x {text!r} in {START_TIMEOUT_S:.0f} s:\n{tail}")


class StandaloneCluster:
    """A Master and single-core Workers on loopback, started on demand and stopped by ``stop``:
    one cluster shared by the tests that need one (a start costs ~15 s, ~45 s under load).
    ``current`` replaces a Worker a test killed, so each test gets the same cluster whole."""

    def __init__(
        self,
        directory: Path,
        workers: int = 2,
        worker_memory: str = "1g",
        executor_memory: str = "512m",
    ) -> None:
        self.directory = directory
        self.size = workers
        self.worker_memory = worker_memory
        self.executor_memory = executor_memory
        self._stack: ExitStack | None = None
        self._cluster: SparkCluster | None = None
        self._started_workers = 0
        self._env: dict[str, str] = {}
        self._url = ""
        self._starts = 0
        self._run_dir = directory

    def current(self) -> SparkCluster:
        """The running cluster with every Worker alive (started, or repaired, here)."""
        if self._cluster is None:
            self._start()
        assert self._cluster is not None
        workers = self._cluster.workers
        if any(w.process.poll() is not None for w in workers):
            workers = tuple(w if w.process.poll() is None else self._worker() for w in workers)
            _wait_for(self._run_dir / "master.log", "Registering worker", self._started_workers)
            self._cluster = replace(self._cluster, workers=workers)
        return self._cluster

    def stop(self) -> None:
        if self._stack is not None:
            self._stack.close()
        self._stack, self._cluster = None, None

    def __enter__(self) -> StandaloneCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _start(self) -> None:
        directory = self._run_dir = self.directory / f"start{self._starts}"
        self._starts += 1
        self._started_workers = 0
        directory.mkdir(parents=True, exist_ok=True)
        conf_dir = directory / "conf"
        conf_dir.mkdir(exist_ok=True)
        (conf_dir / "spark-defaults.conf").write_text(
            f"spark.executor.memory {self.executor_memory}\n"
            "spark.executor.cores 1\n"
            "spark.driver.host 127.0.0.1\n"
            "spark.driver.bindAddress 127.0.0.1\n"
        )
        self._env = {
            **os.environ,
            "SPARK_HOME": str(Path(pyspark.__file__).parent),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_CONF_DIR": str(conf_dir),
            "PYSPARK_PYTHON": sys.executable,
            # The executors' Python workers import this checkout's engine (``common``,
            # ``engine_spark``), as the driver does, not the one the venv installs.
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p
            ),
            "SPARK_WORKER_DIR": str(directory / "work"),
            "SPARK_LOCAL_DIRS": str(directory / "scratch"),
            "SPARK_DAEMON_MEMORY": "256m",
        }
        self._url = f"spark://127.0.0.1:{_free_port()}"
        self._stack = ExitStack()
        try:
            master = ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
            master += ["--port", self._url.rsplit(":", 1)[1], "--webui-port", str(_free_port())]
            self._stack.enter_context(_daemon(master, self._run_dir / "master.log", self._env))
            _wait_for(self._run_dir / "master.log", "I have been elected leader", 1)
            workers = tuple(self._worker() for _ in range(self.size))
            _wait_for(self._run_dir / "master.log", "Registering worker", self._started_workers)
        except BaseException:
            self.stop()
            raise
        self._cluster = SparkCluster(self._url, conf_dir, workers, directory / "master.log")

    def _worker(self) -> SparkWorker:
        """One more Worker (its own work and log files: a replacement's do not mix with the
        killed one's)."""
        assert self._stack is not None
        index = self._started_workers
        self._started_workers += 1
        work_dir = self._run_dir / "work" / f"worker{index}"
        worker = ["org.apache.spark.deploy.worker.Worker", self._url, "--host", "127.0.0.1"]
        worker += ["--cores", "1", "--memory", self.worker_memory]
        worker += ["--webui-port", str(_free_port()), "--work-dir", str(work_dir)]
        log = self._run_dir / f"worker{index}.log"
        process = self._stack.enter_context(_daemon(worker, log, self._env))
        return SparkWorker(process, work_dir)


@contextmanager
def standalone_cluster(
    directory: Path, workers: int = 2, worker_memory: str = "1g", executor_memory: str = "512m"
) -> Iterator[SparkCluster]:
    """A Master and ``workers`` single-core Workers on loopback, stopped on exit."""
    with StandaloneCluster(directory, workers, worker_memory, executor_memory) as cluster:
        yield cluster.current()
