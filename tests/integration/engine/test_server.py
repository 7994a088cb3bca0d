"""The server around the engine: health, reflection, Unix socket, start-up and SIGTERM."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import grpc
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from common.engine_rpc import engine_pb2_grpc
from common.odf import engine_protocol as ep
from common.odf.fragments import OffsetInterval
from engine_spark.server import EngineServer
from tests.integration.engine import client
from tests.integration.engine.datasets import InputDataset, OutputDataset, at, sql
from tests.support.engine_server import engine_server_process, health_status, wait_until_serving

pytestmark = [pytest.mark.spark, pytest.mark.grpc]


def test_health_and_reflection(engine_channel: grpc.Channel) -> None:
    health = health_pb2_grpc.HealthStub(engine_channel)
    for service in ("", "engine.Engine"):
        reply = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING

    stub = reflection_pb2_grpc.ServerReflectionStub(engine_channel)
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    (reply,) = list(stub.ServerReflectionInfo(iter([request]), timeout=10))
    names = {s.name for s in reply.list_services_response.service}
    assert {"engine.Engine", "grpc.health.v1.Health"} <= names


def test_transform_over_the_unix_socket(engine_server: EngineServer, workdir: Path) -> None:
    assert engine_server.settings.unix_socket is not None
    src = InputDataset(workdir / "in", "a", pa.schema([("v", pa.int64())]))
    src.append([{"event_time": at(0), "v": 1}])
    src.append([{"event_time": at(1), "v": 41}])
    out = OutputDataset(workdir / "out", "b", sql("select event_time, v + 1 as w from a"))
    request = out.request([src.take()], system_time=at(10))
    with grpc.insecure_channel(f"unix:{engine_server.settings.unix_socket}") as channel:
        response = client.transform(engine_pb2_grpc.EngineStub(channel), request)
    assert isinstance(response, ep.TransformResponseSuccess), response
    assert response.new_offset_interval == OffsetInterval(start=0, end=1)
    rows = pq.read_table(request.new_data_path).to_pylist()
    assert rows == [  # inputs were written at T0: the rows carry the request's system time
        {"offset": 0, "op": 0, "system_time": at(10), "event_time": at(0), "w": 2},
        {"offset": 1, "op": 0, "system_time": at(10), "event_time": at(1), "w": 42},
    ]


def log_events(path: Path) -> list[dict[str, object]]:
    """The JSON log lines (``--log-json``) of an engine process, in order."""
    lines = path.read_text(errors="replace").splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


def test_server_process_listens_at_once_and_stops_on_sigterm(tmp_path: Path) -> None:
    """``python -m engine_spark``: ports first, Spark in the background, clean SIGTERM.

    The order is read from the process's own log rather than from timings, which a busy
    machine stretches: listening before Spark is ready, and on SIGTERM the gRPC server stops,
    then Spark, then the process exits with 0 (``terminate`` SIGKILLs it only after its
    generous timeout, which would give -9).
    """
    log_path = tmp_path / "engine.log"
    started = time.monotonic()
    with engine_server_process(
        wait=False, log_path=log_path, extra_args=("-v", "--log-json")
    ) as server:
        while True:
            try:
                socket.create_connection(("127.0.0.1", server.port), timeout=0.2).close()
                break
            except OSError:
                assert server.process.poll() is None, log_path.read_text(errors="replace")
                assert time.monotonic() - started < 180, "port not accepting connections"
                time.sleep(0.05)
        assert health_status(server.target) in (
            health_pb2.HealthCheckResponse.NOT_SERVING,
            health_pb2.HealthCheckResponse.SERVING,
        )
        wait_until_serving(server.target, process=server.process)
        assert server.terminate(timeout=180) == 0
    events = [e["event"] for e in log_events(log_path)]
    order = [
        "server.listening",
        "engine.ready",
        "server.signal",
        "server.stopped",
        "engine.stopped",
    ]
    assert [e for e in events if e in order] == order, events
    (signal_event,) = [e for e in log_events(log_path) if e["event"] == "server.signal"]
    assert signal_event["signal"] == "SIGTERM"
