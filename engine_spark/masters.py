"""Spark master URLs the engine accepts, and what each kind needs (no pyspark).

The master is handed to Spark unchanged (``spark.master``; a Connect URL to the Connect
client); this module only refuses, with one line naming the value, what Spark would reject
later with a long JVM trace, and what the engine cannot run on (``check_reachable``: a
Connect server nobody listens at, which the Connect client would retry for minutes):

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
import socket
from enum import Enum
from urllib.parse import urlsplit


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

CONNECT_DEFAULT_PORT = 15002
REACH_TIMEOUT_S = 10.0
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


def connect_address(url: str) -> tuple[str, int]:
    """Host and port of ``sc://HOST[:PORT][/;params]`` (Connect's default port: 15002)."""
    parsed = urlsplit(url.split(";", 1)[0])
    try:
        port = parsed.port or CONNECT_DEFAULT_PORT
    except ValueError:
        raise ValueError(f"{url}: the port is not a number in 0..65535") from None
    if parsed.scheme != "sc" or not parsed.hostname:
        raise ValueError(f"{url}: not a Spark Connect URL (sc://HOST:PORT)")
    return parsed.hostname, port


def check_reachable(url: str, timeout: float = REACH_TIMEOUT_S) -> None:
    """``ValueError`` unless something accepts connections at the URL's address: the Connect
    client would otherwise retry for minutes before failing."""
    host, port = connect_address(url)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as e:
        raise ValueError(f"{url}: cannot reach the Spark Connect server: {e}") from None
