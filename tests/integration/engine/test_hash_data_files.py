"""HashDataFiles through a real gRPC client, server and SparkSession (local master): each
file's answer is what the coordinator's own ``inspect_data_file`` gives for it, computed in
Spark tasks; a damaged, missing or unreadable file is its own answer naming it."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from common.engine_rpc import engine_pb2_grpc
from common.hashing.data_file import inspect_data_file
from common.odf import engine_protocol as ep
from tests.integration.engine import client

pytestmark = [pytest.mark.spark, pytest.mark.grpc]


def _write(path: Path, rows: int, *, seed: int) -> Path:
    table = pa.table(
        {
            "offset": pa.array(range(rows), pa.int64()),
            "event_time": pa.array(
                [datetime(2024, 1, 1, tzinfo=UTC)] * rows, pa.timestamp("ms", tz="UTC")
            ),
            "city": pa.array([f"c{seed}-{i}" if i % 7 else None for i in range(rows)]),
            "tags": pa.array([[f"t{i % 3}"] * (i % 3) for i in range(rows)]),
            "where": pa.array(
                [None if i % 5 == 0 else {"x": i * seed, "y": None} for i in range(rows)],
                pa.struct([("x", pa.int64()), ("y", pa.string())]),
            ),
        }
    )
    pq.write_table(table, path, row_group_size=max(1, rows // 3))
    return path


def _answer(stub: engine_pb2_grpc.EngineStub, paths: list[Path]) -> ep.HashDataFilesResponseSuccess:
    answer = client.hash_data_files(
        stub, ep.HashDataFilesRequest(data_paths=tuple(str(p) for p in paths))
    )
    assert isinstance(answer, ep.HashDataFilesResponseSuccess), answer
    return answer


def test_each_files_answer_is_the_coordinators_inspection_and_a_bad_file_is_named(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path
) -> None:
    good = [
        _write(workdir / f"good-{i}.parquet", rows, seed=i)
        for i, rows in enumerate((1, 10, 25_000))
    ]
    flipped = workdir / "flipped.parquet"  # bytes changed in place: same size, other hash
    shutil.copy(good[2], flipped)
    data = bytearray(flipped.read_bytes())
    data[len(data) // 2] ^= 0xFF
    flipped.write_bytes(bytes(data))
    not_parquet = workdir / "not-parquet"
    not_parquet.write_text("offset,city\n0,a\n")
    missing = workdir / "missing.parquet"
    directory = workdir / "a-directory"
    directory.mkdir()
    paths = [*good, flipped, not_parquet, missing, directory]

    answer = _answer(engine_stub, paths)

    assert [f.data_path for f in answer.files] == [str(p) for p in paths]
    assert 1 <= answer.tasks <= len(paths)
    for path, got in zip(paths[:5], answer.files[:5], strict=True):
        facts = inspect_data_file(path, str(path))
        assert got.error is None, got
        assert got.size == facts.size == path.stat().st_size
        assert got.physical_hash == str(facts.physical_hash)
        assert got.logical_hash == (str(facts.logical_hash) if facts.logical_hash else None)
        assert got.num_records == (facts.records or 0)
        assert got.unreadable == facts.unreadable
        assert got.invalid_utf8 == facts.invalid_utf8
        assert got.exposed_slots == facts.exposed_slots
        columns = tuple((c.name, c.arrow_type) for c in got.columns) if got.columns else None
        assert columns == facts.columns
        # computed in a Python worker of the (local) driver's JVM, not in the engine's process
        assert got.hashed_by is not None and got.hashed_by.startswith("driver on "), got
    assert [f.num_records for f in answer.files[:3]] == [1, 10, 25_000]
    assert answer.files[3].physical_hash != answer.files[2].physical_hash
    assert answer.files[3].size == answer.files[2].size
    assert answer.files[4].unreadable is not None and answer.files[4].logical_hash is None
    for path, got in zip(paths[5:], answer.files[5:], strict=True):
        assert got.error is not None and str(path) in got.error, got
        assert got.physical_hash is None and got.logical_hash is None


def test_more_files_than_one_call_may_carry_are_refused(
    engine_stub: engine_pb2_grpc.EngineStub, workdir: Path
) -> None:
    path = str(workdir / "x.parquet")
    too_many = ep.HashDataFilesRequest(data_paths=(path,) * (ep.MAX_HASHED_FILES + 1))
    answer = client.hash_data_files(engine_stub, too_many)
    assert isinstance(answer, ep.HashDataFilesResponseInvalidQuery), answer
    assert f"at most {ep.MAX_HASHED_FILES}" in answer.message
    outside = client.hash_data_files(
        engine_stub, ep.HashDataFilesRequest(data_paths=("/etc/passwd",))
    )
    assert isinstance(outside, ep.HashDataFilesResponseInternalError), outside
    assert "data_paths[0] /etc/passwd is outside the engine's data roots" in outside.message
