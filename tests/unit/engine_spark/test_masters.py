"""Spark master URLs: which the engine accepts, and that the workspace's ``engine.master``
reaches Spark unchanged (no JVM; k8s and YARN cannot run on this machine, their path can)."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.config import parse_config
from coordinator.engine.embedded import EmbeddedEngineProvider
from coordinator.engine.factory import provider_from_config
from coordinator.engine.provider import EngineMounts
from engine_spark.__main__ import parse_args, server_settings
from engine_spark.masters import MasterKind, check_master, master_kind
from engine_spark.session import SessionSettings, session_conf

ACCEPTED = {
    "local": MasterKind.LOCAL,
    "local[2]": MasterKind.LOCAL,
    "local[*]": MasterKind.LOCAL,
    "local[4,3]": MasterKind.LOCAL,
    "spark://127.0.0.1:7077": MasterKind.STANDALONE,
    "spark://m1:7077,m2:7077": MasterKind.STANDALONE,
    "k8s://https://10.0.0.1:6443": MasterKind.KUBERNETES,
    "k8s://https://kubernetes.default.svc": MasterKind.KUBERNETES,
    "k8s://api.example.org:443": MasterKind.KUBERNETES,
    "yarn": MasterKind.YARN,
    "sc://connect.example.org:15002": MasterKind.CONNECT,
}


@pytest.mark.parametrize(("master", "kind"), ACCEPTED.items())
def test_master_kinds(master: str, kind: MasterKind) -> None:
    assert master_kind(master) is kind


@pytest.mark.parametrize(
    "master",
    [
        "",
        "local[0]",
        "local[x]",
        "spark://",
        "spark://host:7077/../x",
        "k8s://",
        "yarn-cluster",
        "mesos://m:5050",
        "local[2] --conf spark.driver.extraJavaOptions=-Dx",
        "spark://h:7077\nspark.x=y",
    ],
)
def test_anything_else_is_refused_naming_it(master: str) -> None:
    with pytest.raises(ValueError, match="is not a Spark master: expected local"):
        master_kind(master)


def test_spark_connect_is_a_master_and_a_bad_master_is_refused() -> None:
    assert check_master("sc://h:15002") is MasterKind.CONNECT
    args = parse_args(["--master", "sc://127.0.0.1:1", "--unix-socket", "/tmp/s"])
    with pytest.raises(ValueError, match=r"^--master sc://127.0.0.1:1: cannot reach the Spark"):
        server_settings(args)
    bad = parse_args(["--master", "bogus", "--unix-socket", "/tmp/s"])
    with pytest.raises(ValueError, match=r"^--master 'bogus' is not a Spark master"):
        server_settings(bad)


@pytest.mark.parametrize(
    "master", ["k8s://https://10.0.0.1:6443", "yarn", "spark://m1:7077,m2:7077", "local[3]"]
)
def test_workspace_master_reaches_spark_unchanged(master: str, tmp_path: Path) -> None:
    config = parse_config(f"engine:\n  master: '{master}'\n")
    provider = provider_from_config(config.engine)
    assert isinstance(provider, EmbeddedEngineProvider)
    command = provider.command(tmp_path, EngineMounts.of([], []))
    assert command[1:3] == ["-m", "engine_spark"]
    args = parse_args(command[3:])
    assert server_settings(args).unix_socket == str(tmp_path / "engine.sock")
    conf = session_conf(SessionSettings(master=args.master))
    assert conf["spark.master"] == master
    # Only local masters pin the driver to loopback: a cluster's executors must reach it.
    assert ("spark.driver.bindAddress" in conf) == master.startswith("local")
