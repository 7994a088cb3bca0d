"""The Spark engine image, run the way the reference coordinator (kamu-cli) runs engines.

kamu-cli starts one container per operation: ``docker run --rm -p 2884 -v <in>:/opt/engine/in/
<hash>:ro ... -v <out>:/opt/engine/out <image>``, with no arguments, user or environment; waits
until the published port serves (30 s); sends one ExecuteTransform whose paths are the
container's; reads the result from the host side of the output mount; then ``docker exec``s
``sh -c "chown ..."`` to hand the files to the host user, and stops the container with SIGTERM.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import grpc
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from docker.models.containers import Container

from common.engine_rpc.grpc_generated import engine_pb2, engine_pb2_grpc
from common.odf import engine_protocol as ep
from common.odf.fragments import (
    DatasetVocabulary,
    OffsetInterval,
    SqlQueryStep,
    TransformSql,
    Watermark,
)
from common.odf.identity import DatasetID
from common.odf.multihash import Multihash
from common.serde.flatbuffers_codec import TRANSFORM_REQUEST, TRANSFORM_RESPONSE
from coordinator.engine.container_runtime import Endpoint, Runtime, wait_for_engine
from tests.support.images import BuiltImage

pytestmark = pytest.mark.containerized

IN_DIR = "/opt/engine/in"
OUT_DIR = "/opt/engine/out"
SYSTEM_TIME = datetime(2024, 6, 1, 12, 0, 0, tzinfo=UTC)
INPUT_ALIAS = "com.example.cities"
CALL_TIMEOUT_S = 300.0
TS_MS = pa.timestamp("ms", tz="UTC")


def _event_times() -> list[datetime]:
    return [datetime(2024, 1, d, tzinfo=UTC) for d in (1, 2, 3)]


def _write_input_slice(directory: Path) -> Path:
    """A root dataset's data slice as kamu stores it: Parquet named by its multihash."""
    table = pa.table(
        {
            "offset": pa.array([0, 1, 2], pa.int64()),
            "op": pa.array([0, 0, 0], pa.int32()),
            "system_time": pa.array([SYSTEM_TIME] * 3, TS_MS),
            "event_time": pa.array(_event_times(), TS_MS),
            "city": pa.array(["Vancouver", "Seattle", "Kyiv"], pa.string()),
            "population": pa.array([675_218, 737_015, 2_952_301], pa.int64()),
        }
    )
    staging = directory / "staging.parquet"
    pq.write_table(table, staging)
    path = directory / Multihash.sha3_256(staging.read_bytes()).to_multibase()
    staging.rename(path)
    return path


def _request(input_name: str) -> ep.TransformRequest:
    data_path = f"{IN_DIR}/{input_name}"
    query = (
        "SELECT event_time, city, population * 10 AS population_x10 "
        f"FROM `{INPUT_ALIAS}` WHERE population > 700000"
    )
    return ep.TransformRequest(
        dataset_id=DatasetID(secrets.token_bytes(32)),
        dataset_alias="com.example.cities-x10",
        system_time=SYSTEM_TIME,
        vocab=DatasetVocabulary(),
        transform=TransformSql(engine="spark", queries=(SqlQueryStep(query=query),)),
        query_inputs=(
            ep.TransformRequestInput(
                dataset_id=DatasetID(secrets.token_bytes(32)),
                dataset_alias=INPUT_ALIAS,
                query_alias=INPUT_ALIAS,
                vocab=DatasetVocabulary(),
                offset_interval=OffsetInterval(start=0, end=2),
                data_paths=(data_path,),
                schema_file=data_path,
                explicit_watermarks=(
                    Watermark(system_time=SYSTEM_TIME, event_time=_event_times()[-1]),
                ),
            ),
        ),
        next_offset=0,
        new_checkpoint_path=f"{OUT_DIR}/checkpoint",
        new_data_path=f"{OUT_DIR}/data",
    )


def _execute_transform(endpoint: Endpoint, request: ep.TransformRequest) -> ep.TransformResponse:
    """The coordinator's side of the stream: skip Progress, return the first terminal message."""
    with grpc.insecure_channel(endpoint.target) as channel:
        stub = engine_pb2_grpc.EngineStub(channel)
        stream = stub.ExecuteTransform(
            engine_pb2.TransformRequest(flatbuffer=TRANSFORM_REQUEST.encode(request)),
            timeout=CALL_TIMEOUT_S,
        )
        for message in stream:
            response = TRANSFORM_RESPONSE.decode(message.flatbuffer)
            if not isinstance(response, ep.TransformResponseProgress):
                return response
    raise AssertionError("engine did not transmit Success or Error message in the response stream")


@pytest.fixture
def engine_container(
    container_runtime: Runtime, engine_image: BuiltImage, tmp_path: Path
) -> Iterator[tuple[Container, Path, Path]]:
    """An engine container started as kamu-cli starts one, with an input slice mounted."""
    in_host = tmp_path / "in"
    out_host = tmp_path / "out"
    in_host.mkdir()
    out_host.mkdir()
    input_file = _write_input_slice(in_host)
    container = container_runtime.client.containers.run(
        engine_image.pinned_ref(),
        name=f"odf-engine-{secrets.token_hex(5)}",
        detach=True,
        ports={"2884/tcp": None},
        volumes={
            str(input_file): {"bind": f"{IN_DIR}/{input_file.name}", "mode": "ro"},
            str(out_host): {"bind": OUT_DIR, "mode": "rw"},
        },
    )
    try:
        yield container, input_file, out_host
    finally:
        container.remove(force=True)


def test_engine_image_executes_a_transform_as_kamu_runs_it(
    container_runtime: Runtime, engine_container: tuple[Container, Path, Path]
) -> None:
    container, input_file, out_host = engine_container
    endpoint = wait_for_engine(container_runtime, container)

    response = _execute_transform(endpoint, _request(input_file.name))

    assert response == ep.TransformResponseSuccess(
        new_offset_interval=OffsetInterval(start=0, end=1),
        new_watermark=_event_times()[-1],
    ), container.logs(tail=50).decode(errors="replace")
    data = pq.read_table(out_host / "data")
    assert data.column_names == [
        "offset",
        "op",
        "system_time",
        "event_time",
        "city",
        "population_x10",
    ]
    assert data.schema.field("offset").type == pa.int64()
    assert data.schema.field("op").type == pa.int32()
    assert data.schema.field("system_time").type == TS_MS
    assert data.to_pylist() == [
        {
            "offset": i,
            "op": 0,
            "system_time": SYSTEM_TIME,
            "event_time": _event_times()[i + 1],
            "city": city,
            "population_x10": population,
        }
        for i, (city, population) in enumerate([("Seattle", 7_370_150), ("Kyiv", 29_523_010)])
    ]
    assert (out_host / "checkpoint").stat().st_size > 0

    # kamu's ownership fix-up: needs sh and chown, and root inside the container.
    exit_code, output = container.exec_run(
        ["sh", "-c", f"chown -Rf 1234:1234 {OUT_DIR}/checkpoint {OUT_DIR}/data"]
    )
    assert exit_code == 0, output
    assert (out_host / "data").stat().st_uid == 1234
    # The input mount is read-only, as kamu mounts it.
    exit_code, _ = container.exec_run(["sh", "-c", f"touch {IN_DIR}/{input_file.name}"])
    assert exit_code != 0

    # SIGTERM reaches the server through tini (PID 1) and it shuts down cleanly, Spark included.
    container.stop(timeout=10)
    status = container.wait(timeout=30)["StatusCode"]
    assert status == 0, container.logs(tail=30).decode(errors="replace")
