"""A Spark Connect server on this machine, started as a user would: pip pyspark's
``sbin/start-connect-server.sh`` (``SPARK_HOME`` = the pyspark package), on loopback, with a
small driver, its pid file and logs in a directory of the caller; stopped with
``stop-connect-server.sh`` (its process killed if that fails)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyspark

from tests.support.ports import free_port

START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class ConnectServerProcess:
    url: str
    """``sc://127.0.0.1:PORT``."""
    log_dir: Path


def _reachable(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _pid(pid_dir: Path) -> int | None:
    files = list(pid_dir.glob("*SparkConnectServer*.pid"))
    return int(files[0].read_text().strip()) if files else None


def _log_tail(log_dir: Path) -> str:
    return "\n".join(p.read_text(errors="replace")[-2000:] for p in log_dir.glob("*.out"))


@contextmanager
def connect_server(directory: Path, driver_memory: str = "512m") -> Iterator[ConnectServerProcess]:
    """A Spark Connect server on a free loopback port, stopped on exit."""
    directory.mkdir(parents=True, exist_ok=True)
    spark_home = Path(pyspark.__file__).parent
    env = {
        **os.environ,
        "SPARK_HOME": str(spark_home),
        "SPARK_PID_DIR": str(directory),
        "SPARK_LOG_DIR": str(directory),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_DIRS": str(directory / "scratch"),
    }
    port = free_port()
    conf = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.ui.enabled": "false",
        "spark.sql.runSQLOnFiles": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
    }
    args = [str(spark_home / "sbin" / "start-connect-server.sh"), "--master", "local[1]"]
    args += ["--driver-memory", driver_memory]
    for key, value in conf.items():
        args += ["--conf", f"{key}={value}"]
    subprocess.run(["bash", *args], env=env, check=True, capture_output=True, timeout=60)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _reachable(port):
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"no Spark Connect server on port {port}:\n{_log_tail(directory)}"
                )
            time.sleep(0.5)
        yield ConnectServerProcess(url=f"sc://127.0.0.1:{port}", log_dir=directory)
    finally:
        pid = _pid(directory)
        stop = spark_home / "sbin" / "stop-connect-server.sh"
        subprocess.run(["bash", str(stop)], env=env, capture_output=True, timeout=60)
        if pid is not None:
            _wait_gone(pid)


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.3)
    os.kill(pid, signal.SIGKILL)
