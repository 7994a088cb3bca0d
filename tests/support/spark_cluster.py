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
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

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

    def running_tasks(self) -> set[str]:
        """TIDs its executors started and have not finished (from their INFO logs)."""
        running: set[str] = set()
        for log in self.executor_logs():
            text = log.read_text(errors="replace")
            running |= set(_RUNNING.findall(text)) - set(_FINISHED.findall(text))
        return running

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

    def engine_env(self) -> dict[str, str]:
        """The environment of an engine driving this cluster (its executors run this Python)."""
        return {"SPARK_CONF_DIR": str(self.conf_dir), "PYSPARK_PYTHON": sys.executable}


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


@contextmanager
def standalone_cluster(
    directory: Path, workers: int = 2, worker_memory: str = "1g", executor_memory: str = "512m"
) -> Iterator[SparkCluster]:
    """A Master and ``workers`` single-core Workers on loopback, stopped on exit."""
    directory.mkdir(parents=True, exist_ok=True)
    conf_dir = directory / "conf"
    conf_dir.mkdir(exist_ok=True)
    (conf_dir / "spark-defaults.conf").write_text(
        f"spark.executor.memory {executor_memory}\n"
        "spark.executor.cores 1\n"
        "spark.driver.host 127.0.0.1\n"
        "spark.driver.bindAddress 127.0.0.1\n"
    )
    spark_home = str(Path(pyspark.__file__).parent)
    env = {
        **os.environ,
        "SPARK_HOME": spark_home,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_CONF_DIR": str(conf_dir),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_WORKER_DIR": str(directory / "work"),
        "SPARK_LOCAL_DIRS": str(directory / "scratch"),
        "SPARK_DAEMON_MEMORY": "256m",
    }
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    master_log = directory / "master.log"
    with ExitStack() as stack:
        master = ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
        master += ["--port", str(port), "--webui-port", str(_free_port())]
        stack.enter_context(_daemon(master, master_log, env))
        _wait_for(master_log, "I have been elected leader", 1)
        handles = []
        for index in range(workers):
            work_dir = directory / "work" / f"worker{index}"
            worker = ["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1"]
            worker += ["--cores", "1", "--memory", worker_memory]
            worker += ["--webui-port", str(_free_port()), "--work-dir", str(work_dir)]
            process = stack.enter_context(_daemon(worker, directory / f"worker{index}.log", env))
            handles.append(SparkWorker(process, work_dir))
        _wait_for(master_log, "Registering worker", workers)
        yield SparkCluster(master_url=url, conf_dir=conf_dir, workers=tuple(handles))
