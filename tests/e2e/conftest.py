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
from tests.support.images import BuiltImage, build_engine_image


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
