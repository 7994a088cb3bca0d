"""FetchStep::Container with a real container: a tiny image built on the project's base image.

The image's script pages through 100 records the way the reference's test script does: it
resumes after the previous ETag, emits ``ODF_BATCH_SIZE`` records as CSV on stdout, writes the
new ETag, and flags ``new-has-more-data`` until it reaches the end.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from common.odf.events import SetPollingSource
from common.odf.fragments import (
    EnvVar,
    FetchStepContainer,
    MergeStrategyAppend,
    ReadStepCsv,
)
from coordinator.engine.container_runtime import Runtime, connect, image_present
from coordinator.ingest.errors import ParameterError, ProcessError
from coordinator.ingest.fetch import ClientFactory, Fetched, UpToDate, fetch
from coordinator.ingest.polling import PollOptions, pull_root
from coordinator.ingest.source_state import ETag
from tests.unit.ingest.helpers import add_data_events, all_data, new_dataset

pytestmark = pytest.mark.containerized

REPO = Path(__file__).resolve().parents[3]
BASE_IMAGE = "localhost/odf-debian-base:bookworm"

SCRIPT = r"""#!/bin/bash
set -euo pipefail
case "${1:-page}" in
  env)
    echo "batch=$ODF_BATCH_SIZE etag=[$ODF_ETAG] lm=[$ODF_LAST_MODIFIED] token=${TOKEN:-}"
    echo "paths=$ODF_NEW_ETAG_PATH,$ODF_NEW_LAST_MODIFIED_PATH,$ODF_NEW_HAS_MORE_DATA_PATH"
    ;;
  fail)
    echo "cannot reach upstream" >&2
    exit 7
    ;;
  page)
    total=100
    start=${ODF_ETAG:-0}
    end=$(( start + ODF_BATCH_SIZE ))
    if (( end > total )); then end=$total; fi
    for (( i = start; i < end; i++ )); do echo "$i,row-$i"; done
    printf '%s' "$end" > "$ODF_NEW_ETAG_PATH"
    if (( end < total )); then touch "$ODF_NEW_HAS_MORE_DATA_PATH"; fi
    ;;
esac
"""
CONTAINERFILE = f"""FROM {BASE_IMAGE}
COPY fetch.sh /opt/fetch.sh
ENTRYPOINT ["/bin/bash", "/opt/fetch.sh"]
"""


@pytest.fixture(scope="module")
def runtime() -> Iterator[Runtime]:
    subprocess.run(
        ["bash", str(REPO / "scripts" / "podman-service.sh"), "install"],
        check=True,
        capture_output=True,
    )
    runtime = connect()
    if not image_present(runtime.client, BASE_IMAGE):
        subprocess.run(
            ["bash", str(REPO / "images" / "base" / "build-base.sh"), BASE_IMAGE], check=True
        )
    yield runtime
    runtime.client.close()


@pytest.fixture(scope="module")
def client(runtime: Runtime) -> docker.DockerClient:
    return runtime.client


@pytest.fixture(scope="module")
def image(client: docker.DockerClient, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The test image, tagged by the hash of its build context (built once)."""
    tag = (
        "localhost/odf-test-fetch:"
        + hashlib.sha256((SCRIPT + CONTAINERFILE).encode()).hexdigest()[:12]
    )
    if not image_present(client, tag):
        context = tmp_path_factory.mktemp("image")
        (context / "fetch.sh").write_text(SCRIPT)
        (context / "Containerfile").write_text(CONTAINERFILE)
        client.images.build(path=str(context), dockerfile="Containerfile", tag=tag, rm=True)
    return tag


def new_client(runtime: Runtime) -> ClientFactory:
    """A factory of clients of ``runtime`` (each fetch closes the client it used)."""
    return lambda: docker.DockerClient(base_url=runtime.base_url)


def run(
    step: FetchStepContainer, prev: ETag | None, tmp_path: Path, runtime: Runtime
) -> Fetched | UpToDate:
    return fetch(step, prev, tmp_path, container_client=new_client(runtime))


def test_pages_with_etags_and_has_more(tmp_path: Path, runtime: Runtime, image: str) -> None:
    step = FetchStepContainer(image=image, env=(EnvVar(name="ODF_BATCH_SIZE", value="40"),))
    seen = []
    state = None
    for _ in range(3):
        result = run(step, state, tmp_path, runtime)
        assert isinstance(result, Fetched)
        lines = result.path.read_text().splitlines()
        seen.append((result.source_state, result.has_more, lines[0], len(lines)))
        state = result.source_state
        assert result.source_event_time is None
    assert seen == [
        (ETag("40"), True, "0,row-0", 40),
        (ETag("80"), True, "40,row-40", 40),
        (ETag("100"), False, "80,row-80", 20),
    ]
    assert isinstance(run(step, ETag("100"), tmp_path, runtime), UpToDate)


def test_environment_conventions(
    tmp_path: Path, runtime: Runtime, image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOKEN", "from-host")
    step = FetchStepContainer(image=image, args=("env",), env=(EnvVar(name="TOKEN"),))
    result = run(step, ETag("7"), tmp_path, runtime)
    assert isinstance(result, Fetched)
    assert result.path.read_text().splitlines() == [
        "batch=10000 etag=[7] lm=[] token=from-host",
        "paths=/opt/odf/out/new-etag,/opt/odf/out/new-last-modified,/opt/odf/out/new-has-more-data",
    ]
    assert result.source_state is None and not result.has_more


def test_no_output_and_no_state_change_is_up_to_date(
    tmp_path: Path, runtime: Runtime, image: str
) -> None:
    step = FetchStepContainer(image=image, command=("true",))
    assert isinstance(run(step, None, tmp_path, runtime), UpToDate)


def test_failures(
    tmp_path: Path, runtime: Runtime, image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ProcessError, match="exited with code 7: cannot reach upstream"):
        run(FetchStepContainer(image=image, args=("fail",)), None, tmp_path, runtime)
    bad_batch = FetchStepContainer(image=image, env=(EnvVar(name="ODF_BATCH_SIZE", value="-42"),))
    with pytest.raises(ParameterError, match="ODF_BATCH_SIZE must be a non-negative integer"):
        run(bad_batch, None, tmp_path, runtime)
    monkeypatch.delenv("ODF_TEST_UNSET", raising=False)
    unset = FetchStepContainer(image=image, env=(EnvVar(name="ODF_TEST_UNSET"),))
    with pytest.raises(ParameterError, match="ODF_TEST_UNSET is not set on the host"):
        run(unset, None, tmp_path, runtime)


def test_pull_ingests_every_page(tmp_path: Path, runtime: Runtime, image: str) -> None:
    source = SetPollingSource(
        fetch=FetchStepContainer(image=image, env=(EnvVar(name="ODF_BATCH_SIZE", value="40"),)),
        read=ReadStepCsv(schema=("n BIGINT", "label STRING")),
        merge=MergeStrategyAppend(),
    )
    ds = new_dataset(tmp_path, source)
    results = list(pull_root(ds, PollOptions(container_client=new_client(runtime))))
    assert [r.num_records for r in results] == [40, 40, 20]
    data = all_data(ds)
    assert data.column("offset").to_pylist() == list(range(100))
    assert data.column("n").to_pylist() == list(range(100))
    assert [e.new_source_state.value for e in add_data_events(ds) if e.new_source_state] == [
        "40",
        "80",
        "100",
    ]
    assert [
        r.up_to_date for r in pull_root(ds, PollOptions(container_client=new_client(runtime)))
    ] == [True]
