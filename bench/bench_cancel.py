"""How fast a cancelled call frees the engine, against the same small query on an idle engine.

Starts ``python -m engine_spark`` once, then repeats: a query that would run for hours is sent
with a short client deadline; the moment the deadline passes, a one-row query is sent, and the
time until its answer is the *recovery* time. The baseline is the same one-row query on the idle
engine, measured in the same run. Without cancellation the one-row query would wait for the
endless one (hours); the target is "within seconds".

    .venv/bin/python bench/bench_cancel.py [--repeats 5] [--deadline 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support

import grpc

from common.engine_rpc import engine_pb2, engine_pb2_grpc
from common.odf import engine_protocol as ep
from common.odf.fragments import TransformSql
from common.serde import flatbuffers_codec as codec
from tests.support.engine_server import engine_server_process

ENDLESS = "SELECT count(*) AS n FROM range(0, 1000000000000000)"


def request(sql: str, output: Path) -> engine_pb2.QueryRequest:
    message = ep.QueryRequest(
        inputs=(), transform=TransformSql(engine="spark", query=sql), output_data_path=str(output)
    )
    return engine_pb2.QueryRequest(flatbuffer=codec.QUERY_REQUEST.encode(message))


def one_row(stub: engine_pb2_grpc.EngineStub, output: Path) -> float:
    started = time.perf_counter()
    (message,) = list(stub.ExecuteQuery(request("SELECT 1 AS x", output), timeout=600))
    response = codec.QUERY_RESPONSE.decode(message.flatbuffer)
    assert isinstance(response, ep.QueryResponseSuccess), response
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--deadline", type=float, default=2.0, help="seconds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-cancel-") as tmp:
        root = Path(tmp)
        with engine_server_process(master="local[2]", data_roots=[root]) as server:
            channel = server.channel()
            stub = engine_pb2_grpc.EngineStub(channel)
            for i in range(3):  # warm-up
                one_row(stub, root / f"warm{i}")
            idle = [one_row(stub, root / f"idle{i}") for i in range(args.repeats)]
            recovery = []
            for i in range(args.repeats):
                endless = stub.ExecuteQuery(
                    request(ENDLESS, root / f"endless{i}"), timeout=args.deadline
                )
                try:
                    list(endless)
                except grpc.RpcError as e:
                    assert e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, e  # type: ignore[attr-defined]
                recovery.append(one_row(stub, root / f"after{i}"))
            channel.close()
    idle_s, recovery_s = statistics.median(idle), statistics.median(recovery)
    print(f"one-row query, idle engine:          median {idle_s:.3f} s  {_runs(idle)}")
    print(f"one-row query, right after a cancel: median {recovery_s:.3f} s  {_runs(recovery)}")
    print(f"cancellation overhead: {recovery_s - idle_s:.3f} s ({recovery_s / idle_s:.1f}x idle)")
    return 0 if recovery_s < 10 else 1


def _runs(values: list[float]) -> str:
    return "[" + ", ".join(f"{v:.2f}" for v in values) + "]"


if __name__ == "__main__":
    sys.exit(main())
