"""The coordinator image: ``odf serve`` in a container, serving a workspace mounted from the
host, with its embedded engine; the host's ``odf`` is its thin client."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from docker.models.containers import Container

from coordinator.engine.container_runtime import Runtime
from tests.support.cli import odf, ok
from tests.support.daemon import wait_until
from tests.support.datasets import derivative, root
from tests.support.images import BuiltImage
from tests.support.ports import free_port
from tests.support.workspace import add, dataset, new_workspace

pytestmark = pytest.mark.containerized

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def coordinator_image(engine_image: BuiltImage) -> BuiltImage:
    """Built with the engine image by scripts/build-images.sh."""
    return BuiltImage.load(REPO / "images" / "coordinator" / ".built")


@pytest.fixture
def served_in_container(
    container_runtime: Runtime, coordinator_image: BuiltImage, tmp_path: Path
) -> Iterator[tuple[Path, Container]]:
    ws = new_workspace(tmp_path / "ws")
    add(
        ws,
        root("a", ["id BIGINT", "v STRING"]),
        derivative("b", "SELECT event_time, id, upper(v) AS v FROM a", ["a"]),
    )
    (ws / "one.csv").write_text("id,v\n1,x\n2,y\n")
    ok(ws, "ingest", "a", "one.csv")  # in process: no daemon yet
    grpc_address, http_address = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    container = container_runtime.client.containers.run(
        coordinator_image.pinned_ref(),
        command=["serve", "--address", grpc_address, "--http-address", http_address],
        name=f"odf-coordinator-{secrets.token_hex(5)}",
        detach=True,
        network_mode="host",
        volumes={str(ws): {"bind": "/workspace", "mode": "rw"}},
    )
    try:
        wait_until(lambda: serves(ws), what="the daemon serves", timeout=120)
        yield ws, container
    finally:
        container.remove(force=True)


def serves(ws: Path) -> bool:
    """Whether ``odf daemon status`` on the host finds the container's daemon."""
    return odf(ws, "daemon", "status").returncode == 0


def test_the_coordinator_image_serves_a_mounted_workspace(
    served_in_container: tuple[Path, Container],
) -> None:
    ws, container = served_in_container
    listing = ok(ws, "list", "-o", "csv")
    assert [line.split(",")[0] for line in listing.splitlines()[1:]] == ["a", "b"]
    # Through the daemon in the container: b follows a, computed by the embedded engine there.
    (ws / "two.csv").write_text("id,v\n3,z\n")
    ok(ws, "ingest", "a", "two.csv")
    wait_until(lambda: dataset(ws, "b").state().num_records == 3, what="b follows a")
    assert ok(ws, "sql", "--command", "SELECT max(v) AS m FROM b").splitlines()[1] == "Z"
    container.stop(timeout=60)  # SIGTERM: graceful
    assert container.wait(timeout=60)["StatusCode"] == 0
    assert not (ws / ".odf" / "run" / "daemon.json").exists()
