"""Fixtures for container tests: the built engine image and a connected container runtime.

The images are built (or found cached) by scripts/build-images.sh, which also installs and
configures Podman. Tests skip only when this machine cannot run containers at all: no Podman,
no Docker, and no apt-get with root rights to install Podman.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.engine.container_runtime import Runtime, connect, image_present
from tests.e2e.test_transform_cli import PipelineRun, run_pipeline
from tests.integration.transform.pipeline import ROUNDS
from tests.support.images import BuiltImage, build_engine_image
from tests.support.spark_cluster import SparkCluster, StandaloneCluster


def cannot_run_containers() -> str | None:
    """Why this machine cannot run containers, or None when it can (or can be set up to)."""
    if shutil.which("podman") or os.environ.get("DOCKER_HOST"):
        return None
    if Path("/var/run/docker.sock").exists():
        return None
    can_install = shutil.which("apt-get") and (os.geteuid() == 0 or shutil.which("sudo"))
    if can_install:
        return None
    return (
        "no container runtime: no podman, no Docker socket, and no apt-get/root to install Podman"
    )


@pytest.fixture(scope="session")
def engine_image() -> BuiltImage:
    """The Spark engine image for the current sources (a cached image when inputs are unchanged)."""
    reason = cannot_run_containers()
    if reason:
        pytest.skip(reason)
    return build_engine_image()


@pytest.fixture(scope="session")
def container_runtime(engine_image: BuiltImage) -> Iterator[Runtime]:
    """The runtime holding ``engine_image`` (Podman's API service, started when needed)."""
    runtime = connect()
    try:
        if not image_present(runtime.client, engine_image.ref):
            pytest.fail(f"{engine_image.ref} is not in the runtime at {runtime.base_url}")
        yield runtime
    finally:
        runtime.client.close()


@pytest.fixture(scope="session")
def embedded_run(tmp_path_factory: pytest.TempPathFactory) -> PipelineRun:
    """The pipeline's every round through ``odf`` with the embedded engine (local mode): what
    the other ways of running it (container, cluster, collected outputs) must reproduce."""
    return run_pipeline(tmp_path_factory.mktemp("embedded"), len(ROUNDS))


CLUSTER_FIXTURE = "spark_cluster"
_SHARED_CLUSTER = pytest.StashKey[StandaloneCluster]()


@pytest.fixture(scope="session")
def _standalone_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StandaloneCluster]:
    with StandaloneCluster(tmp_path_factory.mktemp("standalone-cluster")) as cluster:
        request.config.stash[_SHARED_CLUSTER] = cluster
        yield cluster


@pytest.fixture
def spark_cluster(_standalone_cluster: StandaloneCluster) -> SparkCluster:
    """One Spark standalone cluster (a Master, two single-core Workers) shared by the tests
    that run on one: started by the first, stopped after the last (they run one after the
    other, see ``pytest_collection_modifyitems``); a Worker a test killed is replaced."""
    return _standalone_cluster.current()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests on the shared cluster run together, where the first of them is."""
    on_cluster = [i for i in items if CLUSTER_FIXTURE in getattr(i, "fixturenames", ())]
    if not on_cluster:
        return
    first = items.index(on_cluster[0])
    rest = [i for i in items[first:] if i not in on_cluster]
    items[first:] = on_cluster + rest


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop the shared cluster once the next test does not run on it (three idle JVMs)."""
    uses = CLUSTER_FIXTURE in getattr(item, "fixturenames", ())
    next_uses = nextitem is not None and CLUSTER_FIXTURE in getattr(nextitem, "fixturenames", ())
    if uses and not next_uses:
        cluster = item.config.stash.get(_SHARED_CLUSTER, None)
        if cluster is not None:
            cluster.stop()
