"""``odf pull`` of derivative datasets through the CLI, in embedded and in container mode.

The pipeline of ``tests.integration.transform.pipeline`` (two roots, a derivative, a
derivative of it, a two-input join) receives data in rounds; each round is ingested with
``odf ingest`` and transformed with one ``odf pull`` (``--all``, or names with ``--recursive``).
Every pull uses a fixed ``--system-time``, so the same rounds give the same records whatever
runs the engine: the container run must reproduce the embedded run's logical hashes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from coordinator.dataset import Dataset
from coordinator.engine.version import embedded_engine_version
from coordinator.workspace import Workspace
from tests.integration.transform.pipeline import (
    DERIVATIVES,
    check_derivative_chain,
    derivative_snapshot,
    execute_transforms,
    records,
    write_round,
    write_snapshots,
)
from tests.support.cli import odf, ok
from tests.support.images import BuiltImage

SYSTEM_TIMES = ("2030-01-01T00:00:00Z", "2030-01-02T00:00:00Z", "2030-01-03T00:00:00Z")
PULLS: tuple[tuple[str, ...], ...] = (
    ("--all",),
    ("big-cities-x10", "city-density", "--recursive"),
    ("--all",),
)
"""How each round is pulled: everything, or the leaves and whatever they depend on."""


@dataclass
class PipelineRun:
    workspace: Path
    pull_output: list[str]

    def dataset(self, name: str) -> Dataset:
        return Workspace(self.workspace).open_dataset(name)

    def logical_hashes(self, name: str) -> list[str]:
        return [
            str(e.new_data.logical_hash)
            for _, e in execute_transforms(self.dataset(name))
            if e.new_data
        ]


def run_pipeline(
    directory: Path, rounds: int, config: str | None = None, env: dict[str, str] | None = None
) -> PipelineRun:
    ws = directory / "ws"
    ws.mkdir(parents=True)
    ok(ws, "init")
    if config is not None:
        (ws / ".odf" / "config.yaml").write_text(config)
    ok(ws, "add", "--recursive", str(write_snapshots(directory / "snapshots")))
    outputs = []
    for index in range(rounds):
        for name, path in write_round(directory / "data", index).items():
            ok(ws, "ingest", name, str(path))
        pull = ("pull", *PULLS[index], "--system-time", SYSTEM_TIMES[index])
        outputs.append(ok(ws, *pull, env=env))
    return PipelineRun(ws, outputs)


@pytest.mark.e2e
def test_pipeline_rounds_in_embedded_mode(embedded_run: PipelineRun) -> None:
    run = embedded_run
    first, second, third = run.pull_output
    assert "big-cities: 2 records (offsets 0..1) from 3 input records" in first
    assert "big-cities-x10: 2 records (offsets 0..1) from 2 input records" in first
    assert "city-density: 2 records (offsets 0..1) from 5 input records" in first
    # --recursive pulled the roots first (push sources: nothing to poll), then the chain.
    assert second.index("cities:") < second.index("big-cities:") < second.index("big-cities-x10:")
    assert "big-cities-x10: 1 record (offsets 2..2)" in second
    # Round 3: only `cities` got data; the join still advances (its other input at rest).
    assert "city-density: no new records from 1 input record," in third
    assert "big-cities: 1 record (offsets 3..3)" in third

    cities, areas = run.dataset("cities"), run.dataset("areas")
    big, x10, density = (run.dataset(n) for n in DERIVATIVES)
    check_derivative_chain(big, [cities])
    check_derivative_chain(x10, [big])
    check_derivative_chain(density, [cities, areas])
    assert records(big).column("city").to_pylist() == ["Kyiv", "Tokyo", "Lagos", "Cairo"]
    assert records(x10).column("offset").to_pylist() == [0, 1, 2, 3]
    assert [len(execute_transforms(d)) for d in (big, x10, density)] == [3, 3, 3]
    _, last = execute_transforms(density)[-1]
    (c, a) = last.query_inputs
    assert c.new_block_hash == cities.head() and a.new_block_hash is None
    assert last.new_watermark == areas.state().last_watermark  # the slower input holds it

    log = ok(run.workspace, "log", "big-cities-x10")
    assert f"version={embedded_engine_version()}" in log and "ExecuteTransform" in log
    tail = ok(run.workspace, "tail", "big-cities-x10", "-n", "1")
    assert "Cairo" in tail and "102300000" in tail
    assert "big-cities: up to date" in ok(run.workspace, "pull", "big-cities")


@pytest.mark.e2e
def test_collected_outputs_reproduce_the_streamed_hashes(
    embedded_run: PipelineRun, tmp_path: Path
) -> None:
    """The engine's former output path (every result collected whole, then written) gives
    the logical hashes of the default one (row-wise results streamed batch by batch)."""
    run = run_pipeline(tmp_path, 2, env={"ODF_ENGINE_OUTPUT_WRITER": "collect"})
    for name in DERIVATIVES:
        produced = run.logical_hashes(name)
        assert produced, name
        assert produced == embedded_run.logical_hashes(name)[: len(produced)], name


@pytest.mark.e2e
@pytest.mark.containerized
def test_container_mode_reproduces_the_embedded_hashes(
    embedded_run: PipelineRun, engine_image: BuiltImage, tmp_path: Path
) -> None:
    config = engine_image.engine_config
    rounds = 2
    run = run_pipeline(tmp_path, rounds, config)
    log = ok(run.workspace, "log", "city-density")
    assert f"version={engine_image.pinned_ref()}" in log
    for name in DERIVATIVES:
        produced = run.logical_hashes(name)
        assert produced, name
        assert produced == embedded_run.logical_hashes(name)[: len(produced)], name
    check_derivative_chain(
        run.dataset("city-density"), [run.dataset("cities"), run.dataset("areas")]
    )


@pytest.mark.e2e
def test_clear_errors_for_a_missing_runtime_image_or_engine(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    ok(ws, "init")
    (ws / ".odf" / "config.yaml").write_text("engine:\n  provider: containr\n")
    result = odf(ws, "pull", "--all")
    assert result.returncode == 1
    assert "config.yaml:2: engine.provider: 'containr' is not one of" in result.stderr
    (ws / ".odf" / "config.yaml").write_text(
        "engine:\n  provider: remote\n  address: /nonexistent/engine.sock\n  startTimeout: 2\n"
    )
    write_snapshots(tmp_path / "snapshots")
    ok(ws, "add", "--recursive", str(tmp_path / "snapshots"))
    ok(ws, "ingest", "cities", str(write_round(tmp_path / "data", 0)["cities"]))
    result = odf(ws, "pull", "big-cities")
    assert result.returncode == 1
    assert result.stderr.strip().startswith("error: remote engine at /nonexistent/engine.sock")
    assert "did not become ready within 2 s" in result.stderr
    # Container mode without a reachable runtime: the transform cannot even be pinned.
    (ws / ".odf" / "config.yaml").write_text("engine:\n  provider: container\n")
    (tmp_path / "other.yaml").write_text(
        derivative_snapshot("other", ["cities"], "SELECT event_time, city FROM cities")
    )
    result = odf(
        ws, "add", str(tmp_path / "other.yaml"), env={"DOCKER_HOST": "unix:///nonexistent.sock"}
    )
    assert result.returncode == 1
    assert result.stderr.startswith(
        "error: container engine: no container runtime answers at unix:///nonexistent.sock"
    )


@pytest.mark.e2e
@pytest.mark.containerized
def test_missing_engine_image_is_a_clear_error(container_runtime: object, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    ok(ws, "init")
    image = "localhost/odf-no-such-engine:0"
    (ws / ".odf" / "config.yaml").write_text(f"engine:\n  provider: container\n  image: {image}\n")
    result = odf(ws, "add", "--recursive", str(write_snapshots(tmp_path / "snapshots")))
    assert result.returncode == 1
    assert f"error: engine image '{image}' is not in the container runtime" in result.stderr
    assert "scripts/build-images.sh" in result.stderr
