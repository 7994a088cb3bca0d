"""A standalone engine is safe to run and to expose: against real ``python -m engine_spark``.

One engine process serves most tests here: TLS, a token, one data root, a queue of one and a
request timeout. Separate short-lived processes check the default bind address and what
happens when the JVM dies.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from common.engine_rpc import engine_pb2, engine_pb2_grpc
from common.odf import engine_protocol as ep
from common.odf.fragments import DatasetVocabulary, TransformSql
from common.serde import flatbuffers_codec as codec
from tests.support.engine_server import (
    EngineServerProcess,
    engine_server_process,
    health_status,
    make_certificate,
    wait_until_serving,
)

pytestmark = [pytest.mark.spark, pytest.mark.grpc]

TOKEN = "s3cr3t-engine-token"
REQUEST_TIMEOUT_S = 15
ENDLESS = "SELECT count(*) AS n FROM range(0, 1000000000000000)"
"""A query that runs for hours: only cancellation ends it."""


@dataclass
class Secured:
    server: EngineServerProcess
    root: Path
    outside: Path
    base: Path
    log: Path

    def stub(self, channel: grpc.Channel) -> engine_pb2_grpc.EngineStub:
        return engine_pb2_grpc.EngineStub(channel)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    base = tmp_path_factory.mktemp("hardening")
    root, outside = base / "root", base / "outside"
    root.mkdir()
    cert, key = make_certificate(base)
    token_file = base / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
    log = base / "engine.log"
    args = [
        "--token-file",
        str(token_file),
        "--tls-cert",
        str(cert),
        "--tls-key",
        str(key),
        "--max-queue",
        "1",
        "--request-timeout",
        str(REQUEST_TIMEOUT_S),
        "-v",
    ]
    with engine_server_process(
        data_roots=[root], credentials=credentials, extra_args=args, log_path=log
    ) as server:
        yield Secured(server=server, root=root, outside=outside, base=base, log=log)


@pytest.fixture
def channel(secured: Secured) -> Iterator[grpc.Channel]:
    with secured.server.channel() as channel:
        yield channel


AUTH = (("authorization", f"Bearer {TOKEN}"),)


def query_request(sql: str, output: Path, inputs: tuple[ep.QueryInput, ...] = ()) -> Any:
    request = ep.QueryRequest(
        inputs=inputs,
        transform=TransformSql(engine="spark", query=sql),
        output_data_path=str(output),
    )
    return engine_pb2.QueryRequest(flatbuffer=codec.QUERY_REQUEST.encode(request))


def run_query(
    stub: engine_pb2_grpc.EngineStub,
    request: Any,
    *,
    timeout: float = 60,
    metadata: Any = AUTH,
) -> ep.QueryResponse:
    (message,) = list(stub.ExecuteQuery(request, timeout=timeout, metadata=metadata))
    return codec.QUERY_RESPONSE.decode(message.flatbuffer)


def validate_request() -> Any:
    request = ep.ValidateQueryRequest(
        dataset_alias="out",
        vocab=DatasetVocabulary(),
        transform=TransformSql(
            engine="spark", query="SELECT TIMESTAMP '2024-01-01 00:00:00' AS event_time, 1 AS x"
        ),
        query_inputs=(),
    )
    return engine_pb2.ValidateQueryRequest(flatbuffer=codec.VALIDATE_QUERY_REQUEST.encode(request))


def status_of(call: Any) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as caught:
        list(call())
    error: Any = caught.value
    return error.code()  # type: ignore[no-any-return]


# --- token and TLS -----------------------------------------------------------------------------


def test_health_answers_without_a_token(secured: Secured) -> None:
    status = health_status(secured.server.target, credentials=secured.server.credentials)
    assert status == health_pb2.HealthCheckResponse.SERVING


def test_calls_need_the_token(secured: Secured, channel: grpc.Channel) -> None:
    stub = secured.stub(channel)
    assert status_of(lambda: stub.ValidateQuery(validate_request(), timeout=30)) == (
        grpc.StatusCode.UNAUTHENTICATED
    )
    wrong = (("authorization", "Bearer not-the-token"),)
    assert status_of(
        lambda: stub.ValidateQuery(validate_request(), timeout=30, metadata=wrong)
    ) == (grpc.StatusCode.UNAUTHENTICATED)
    (message,) = list(stub.ValidateQuery(validate_request(), timeout=60, metadata=AUTH))
    response = codec.VALIDATE_QUERY_RESPONSE.decode(message.flatbuffer)
    assert isinstance(response, ep.ValidateQueryResponseSuccess)


def test_a_plain_text_client_cannot_talk_to_the_tls_port(secured: Secured) -> None:
    assert health_status(secured.server.target, timeout=3) is None


def test_reflection_is_off_unless_asked(secured: Secured, channel: grpc.Channel) -> None:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    code = status_of(lambda: stub.ServerReflectionInfo(iter([request]), timeout=10, metadata=AUTH))
    assert code == grpc.StatusCode.UNIMPLEMENTED


# --- data roots --------------------------------------------------------------------------------


def test_a_query_writes_under_its_root(secured: Secured, channel: grpc.Channel) -> None:
    output = secured.root / "ok" / "out.parquet"
    response = run_query(secured.stub(channel), query_request("SELECT 1 AS x", output))
    assert response == ep.QueryResponseSuccess(num_records=1)
    assert output.is_file()


def test_an_output_outside_the_roots_is_refused_and_not_created(
    secured: Secured, channel: grpc.Channel
) -> None:
    target = secured.outside / "deep" / "out.parquet"
    response = run_query(secured.stub(channel), query_request("SELECT 1 AS x", target))
    assert isinstance(response, ep.QueryResponseInternalError)
    assert response.message == (
        f"request refused: output_data_path {target} is outside the engine's data roots:"
        f" {secured.root}"
    )
    assert not secured.outside.exists()


def test_paths_through_symlinks_and_dot_dot_are_refused(
    secured: Secured, channel: grpc.Channel
) -> None:
    secret = secured.base / "secret.parquet"
    secret.write_bytes(b"PAR1 not really")
    link = secured.root / "link"
    link.symlink_to(secured.base)
    stub = secured.stub(channel)
    sneaky_input = ep.QueryInput(alias="t", data_paths=(str(link / "secret.parquet"),))
    response = run_query(
        stub, query_request("SELECT * FROM t", secured.root / "o1", inputs=(sneaky_input,))
    )
    assert isinstance(response, ep.QueryResponseInternalError)
    assert f"inputs[0].data_paths[0] {link}/secret.parquet (resolves to {secret})" in (
        response.message
    )
    escaping = secured.root / ".." / "escaped.parquet"
    response = run_query(stub, query_request("SELECT 1 AS x", escaping))
    assert isinstance(response, ep.QueryResponseInternalError)
    assert "outside the engine's data roots" in response.message
    assert not (secured.base / "escaped.parquet").exists()


# --- cancellation, timeout, the bounded queue --------------------------------------------------


def test_a_passed_deadline_cancels_the_spark_job(secured: Secured, channel: grpc.Channel) -> None:
    stub = secured.stub(channel)
    endless = query_request(ENDLESS, secured.root / "endless")
    code = status_of(lambda: stub.ExecuteQuery(endless, timeout=3, metadata=AUTH))
    assert code == grpc.StatusCode.DEADLINE_EXCEEDED
    # The engine is free again long before the request timeout would have ended the query.
    started = time.monotonic()
    after = run_query(stub, query_request("SELECT 1 AS x", secured.root / "after"), timeout=8)
    assert after == ep.QueryResponseSuccess(num_records=1)
    assert time.monotonic() - started < REQUEST_TIMEOUT_S - 3
    assert "request.cancelled" in secured.log.read_text()


def test_the_request_timeout_ends_a_long_call(secured: Secured, channel: grpc.Channel) -> None:
    started = time.monotonic()
    response = run_query(secured.stub(channel), query_request(ENDLESS, secured.root / "long"))
    assert isinstance(response, ep.QueryResponseInternalError)
    assert response.message == (
        "the QueryRequest was cancelled: it ran longer than the engine's request timeout"
        f" of {REQUEST_TIMEOUT_S} s"
    )
    assert time.monotonic() - started < REQUEST_TIMEOUT_S + 20


def test_a_full_queue_refuses_and_health_answers_while_busy(
    secured: Secured, channel: grpc.Channel
) -> None:
    stub = secured.stub(channel)
    # A server-streaming call starts when made; reading its stream is not needed.
    running = stub.ExecuteQuery(
        query_request(ENDLESS, secured.root / "a"), timeout=60, metadata=AUTH
    )
    calls = [running]
    try:
        time.sleep(1.0)
        queued = stub.ExecuteQuery(
            query_request(ENDLESS, secured.root / "b"), timeout=60, metadata=AUTH
        )
        calls.append(queued)
        time.sleep(1.0)
        third = query_request("SELECT 1 AS x", secured.root / "c")
        code = status_of(lambda: stub.ExecuteQuery(third, timeout=30, metadata=AUTH))
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
        for _ in range(3):
            status = health_status(
                secured.server.target, timeout=2, credentials=secured.server.credentials
            )
            assert status == health_pb2.HealthCheckResponse.SERVING
    finally:
        for call in calls:
            call.cancel()
    # The cancelled calls leave once their Spark jobs are cancelled; until then it is busy.
    deadline = time.monotonic() + 20
    while True:
        try:
            after = run_query(stub, query_request("SELECT 1 AS x", secured.root / "d"))
            break
        except grpc.RpcError as e:
            error: Any = e
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert time.monotonic() < deadline, "the cancelled calls kept the engine busy"
            time.sleep(0.5)
    assert after == ep.QueryResponseSuccess(num_records=1)


# --- separate processes ------------------------------------------------------------------------


def listening_addresses(port: int) -> set[str]:
    """The local addresses of TCP sockets listening on ``port`` (from /proc/net/tcp{,6})."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            address, port_hex = fields[1].split(":")
            if fields[3] == "0A" and int(port_hex, 16) == port:
                found.add(address)
    return found


def test_the_default_bind_address_is_loopback(tmp_path: Path) -> None:
    with engine_server_process(
        host=None, master="local[1]", wait=False, extra_args=["--no-warm-up"]
    ) as server:
        deadline = time.monotonic() + 30
        while not listening_addresses(server.port):
            assert server.process.poll() is None, "the engine exited"
            assert time.monotonic() < deadline, "the engine never listened"
            time.sleep(0.1)
        loopback = {"0100007F", "0000000000000000FFFF00000100007F"}  # 127.0.0.1, v4-mapped
        assert listening_addresses(server.port) <= loopback


def child_pids(pid: int) -> list[int]:
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            children.append(int(stat.parent.name))
    return children


def test_a_dead_jvm_stops_the_server_with_an_error(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    with engine_server_process(
        master="local[1]", data_roots=[tmp_path], extra_args=["--no-warm-up"], log_path=log
    ) as server:
        wait_until_serving(server.target, process=server.process)
        (jvm,) = child_pids(server.process.pid)
        os.kill(jvm, signal.SIGKILL)
        code = server.process.wait(60)
        assert code == 3
        text = log.read_text()
        assert "engine.jvm_died" in text
        assert "error: the engine stopped: its JVM died" in text
