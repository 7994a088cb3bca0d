"""One SparkSession, one SparkEngine and one gRPC server for the whole test run.

Spark takes seconds to start, so every engine test shares them (session scope). The server is
the real ``EngineServer`` on a free loopback port and a Unix socket, in this process, serving
the shared engine; tests talk to it through real gRPC stubs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from common.engine_rpc import engine_pb2_grpc
from engine_spark.data_roots import DataRoots
from engine_spark.engine import SparkEngine
from engine_spark.server import EngineServer, ServerSettings
from engine_spark.session import SessionSettings, build_session


@pytest.fixture(scope="session")
def spark_engine() -> Iterator[SparkEngine]:
    engine = SparkEngine(build_session(SessionSettings(master="local[2]")))
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def engine_server(
    spark_engine: SparkEngine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EngineServer]:
    socket_path = tmp_path_factory.mktemp("engine-socket") / "engine.sock"
    settings = ServerSettings(
        host="127.0.0.1",
        ports=(0,),
        unix_socket=str(socket_path),
        data_roots=DataRoots.of([str(tmp_path_factory.getbasetemp())]),
        reflection=True,
    )
    server = EngineServer(settings, lambda: spark_engine)
    server.start()
    assert server.wait_until_ready(60)
    yield server
    server.stop(grace=1)


@pytest.fixture(scope="session")
def engine_channel(engine_server: EngineServer) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(f"127.0.0.1:{engine_server.bound_ports[0]}") as channel:
        yield channel


@pytest.fixture
def engine_stub(engine_channel: grpc.Channel) -> engine_pb2_grpc.EngineStub:
    return engine_pb2_grpc.EngineStub(engine_channel)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path
