"""The one place a SparkSession is built: local by default, tuned for small transactions."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark import SparkContext
from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"

EXIT_ON_OUT_OF_MEMORY = "-XX:+ExitOnOutOfMemoryError"

_QUIET_PYTHON_LOGGERS = ("py4j", "pyspark", "SQLQueryContextLogger")

SANDBOX_SQL_CONF: dict[str, str] = {
    "spark.sql.runSQLOnFiles": "false",
    "spark.sql.variable.substitute": "false",
    "spark.sql.scripting.enabled": "false",
}
"""Session settings of the sandbox, also set on every request's session (``request_session``)
so they hold even when the process's SparkContext was started by someone else."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSettings:
    """How to build the engine's SparkSession."""

    master: str = DEFAULT_MASTER
    """``local[*]``, ``local[N]`` or a cluster master URL (``spark://host:7077``, ...)."""
    driver_memory: str | None = None
    shuffle_partitions: int = 4
    """Small: a transaction is usually thousands to millions of rows, not billions."""
    log_level: str = "FATAL"
    """Spark's own (log4j) level; task failures are reported in responses, not logs."""
    extra_conf: Mapping[str, str] = field(default_factory=dict)
    jvm_options: tuple[str, ...] = ()
    """More options of the driver JVM (the class-data sharing archive's)."""


def driver_java_options(settings: SessionSettings) -> str:
    """``spark.driver.extraJavaOptions``: the launcher puts them on the driver JVM only (not on
    its own short-lived JVM, as ``JAVA_TOOL_OPTIONS`` would)."""
    return " ".join(("-Duser.timezone=UTC", EXIT_ON_OUT_OF_MEMORY, *settings.jvm_options))


def session_conf(settings: SessionSettings) -> dict[str, str]:
    """The Spark configuration of the engine session (pure; tested without a JVM)."""
    conf = {
        "spark.app.name": "odf-engine-spark",
        "spark.master": settings.master,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.ansi.enabled": "true",
        "spark.sql.shuffle.partitions": str(settings.shuffle_partitions),
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # Results come back as Arrow: big batches halve the round trips (measured ~35% faster
        # on the 100k-row bench transaction).
        "spark.sql.execution.arrow.maxRecordsPerBatch": "200000",
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MILLIS",
        "spark.sql.pyspark.jvmStacktrace.enabled": "false",
        # The SQL sandbox (``sandbox/``) decides what a query may do; these keep the session
        # itself from helping: no SQL directly on files, no ``${env:VAR}`` substitution in
        # the query text, no SQL scripts, no Hive (catalog in memory, nothing persists).
        **SANDBOX_SQL_CONF,
        "spark.sql.catalogImplementation": "in-memory",
        # Out of heap, the driver JVM exits (the request fails, the server reports it and the
        # coordinator sees a dead engine) instead of hanging with a dead scheduler thread.
        "spark.driver.extraJavaOptions": driver_java_options(settings),
        "spark.executor.extraJavaOptions": "-Duser.timezone=UTC -XX:+ExitOnOutOfMemoryError",
        # A task's StackOverflowError (a regular expression that backtracks catastrophically,
        # a deeply nested expression) fails that task and its request, not the JVM: Spark's
        # executor otherwise calls such an error fatal and exits the process, which in local
        # mode is the engine. Running out of heap still exits (the options above).
        "spark.executor.killOnFatalError.depth": "0",
    }
    if settings.master.startswith("local"):
        # No network needed in local mode: keep the driver on loopback.
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    if settings.driver_memory:
        conf["spark.driver.memory"] = settings.driver_memory
    conf.update(settings.extra_conf)
    return conf


def quiet_pandas_warning() -> None:
    """PySpark warns about the pandas version on import of its Arrow and Connect helpers;
    the engine uses no pandas."""
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")


def build_session(settings: SessionSettings) -> SparkSession:
    """Start (or join) the process's SparkSession with the engine's configuration."""
    os.environ.setdefault("TZ", "UTC")
    if settings.master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # Python tasks (Arrow IPC inputs read in place, arrow_scan.py) run this interpreter.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    for name in _QUIET_PYTHON_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    quiet_pandas_warning()
    builder = SparkSession.builder
    for key, value in session_conf(settings).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(settings.log_level)
    return session


def jvm_process() -> subprocess.Popen[bytes] | None:
    """The driver JVM PySpark launched in this process (None if it joined a running one)."""
    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None) if gateway is not None else None
    return process if isinstance(process, subprocess.Popen) else None


REQUEST_CONF: dict[str, str] = {"spark.sql.ui.explainMode": "simple"}
"""Every request session's own settings besides the sandbox's. Spark describes each query it
runs to its SQL listener (for a web UI the engine does not serve) in this explain mode; the
default, ``formatted``, walks the plan once more for numbered operator details: measured
(``bench/bench_phases.py``) ~30 ms of the driver JVM's CPU per job saved."""

SMALL_INPUT_BYTES = 16 << 20
"""Inputs up to this size (their files' bytes together) run a raw or ad-hoc query's shuffles
in one partition, without adaptive re-planning (``SMALL_INPUT_CONF``)."""
SMALL_INPUT_CONF: dict[str, str] = {
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.shuffle.partitions": "1",
}
"""A small query's settings: with adaptive execution every shuffle ends a job and the plan is
optimized again before the next one (a ``count(*)`` is two jobs); without it, one job. One
shuffle partition: one reduce task instead of four, each a few milliseconds of scheduling for
kilobytes of rows. The values do not change (shuffled results have no defined row order: the
engine sorts them, ``ordering.py``); measured in ``bench/bench_phases.py`` (docs/performance.md)."""


def small_input_settings(session: SparkSession, paths: Iterable[str]) -> bool:
    """Give ``session`` (a request's own) ``SMALL_INPUT_CONF`` when the files at ``paths``
    hold at most ``SMALL_INPUT_BYTES`` together; whether they did."""
    total = 0
    for path in paths:
        try:
            total += os.stat(path).st_size
        except OSError:  # reading the inputs reports it
            return False
        if total > SMALL_INPUT_BYTES:
            return False
    conf = session.conf
    for key, value in SMALL_INPUT_CONF.items():
        conf.set(key, value)
    return True


def request_session(session: SparkSession) -> SparkSession:
    """A fresh, isolated session for one request (``newSession``: the shared SparkContext,
    its own temp views, functions and SQL conf), so no view, function or setting a request
    creates survives it. Cheap: ~1 ms more than the former clone of a template session."""
    jsession: Any = session._jsparkSession.newSession()
    conf = jsession.conf()
    for key, value in {**SANDBOX_SQL_CONF, **REQUEST_CONF}.items():
        conf.set(key, value)
    return SparkSession(session.sparkContext, jsession)
