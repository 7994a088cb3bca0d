"""Spark master URLs the engine accepts, and what each kind needs (pure: no pyspark).

The master is handed to Spark unchanged (``spark.master``); this module only refuses, with
one line naming the value, what Spark would reject later with a long JVM trace, and what
the engine cannot run on:

- ``local``, ``local[N]``, ``local[*]``, ``local[N,F]``: the driver's own cores.
- ``spark://HOST:PORT[,HOST:PORT...]``: a standalone cluster (several Masters: ZooKeeper HA).
- ``k8s://https://HOST:PORT`` (or ``k8s://HOST:PORT``, which Spark reads as https): the
  engine is the driver, executors are pods of the engine image (docs/scale.md).
- ``yarn``: the cluster named by ``HADOOP_CONF_DIR``/``YARN_CONF_DIR`` (client deploy mode).
- ``sc://HOST:PORT``: a Spark Connect server. The engine vets and analyzes queries in a
  local JVM session (``CONNECT_LOCAL_MASTER``) and executes the stateless ones on the
  server (``connect.py``, docs/scale.md "Spark Connect").
"""

from __future__ import annotations

import re
from enum import Enum


class MasterKind(Enum):
    LOCAL = "local"
    STANDALONE = "spark"
    KUBERNETES = "k8s"
    YARN = "yarn"
    CONNECT = "sc"


_HOST_PORT = r"[A-Za-z0-9._-]+(:[0-9]{1,5})?|\[[0-9A-Fa-f:]+\](:[0-9]{1,5})?"
_PATTERNS = {
    MasterKind.LOCAL: re.compile(r"local(\[(\*|[1-9][0-9]*)(,[1-9][0-9]*)?\])?"),
    MasterKind.STANDALONE: re.compile(rf"spark://({_HOST_PORT})(,({_HOST_PORT}))*"),
    MasterKind.KUBERNETES: re.compile(rf"k8s://(https?://)?({_HOST_PORT})/?"),
    MasterKind.YARN: re.compile(r"yarn"),
    MasterKind.CONNECT: re.compile(rf"sc://({_HOST_PORT})(/[^\s]*)?"),
}
EXPECTED = "local[N], spark://HOST:PORT, k8s://https://HOST:PORT, yarn or sc://HOST:PORT"

CONNECT_LOCAL_MASTER = "local[1]"
"""The engine's own session with a Connect master: it vets queries over empty inputs only."""


def master_kind(master: str) -> MasterKind:
    """The kind of ``master``; ``ValueError`` naming it if it is no Spark master URL."""
    for kind, pattern in _PATTERNS.items():
        if pattern.fullmatch(master):
            return kind
    raise ValueError(f"{master!r} is not a Spark master: expected {EXPECTED}")


def check_master(master: str) -> MasterKind:
    """``master_kind``, refusing the masters the engine cannot run on (``ValueError``)."""
    return master_kind(master)
