"""The key of a kept ad-hoc query plan (``engine_spark/planned_queries.py``): the same query
over the same files is the same key; anything that can change its rows is another; what is
not to be kept has none."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from common.odf import engine_protocol as ep
from common.odf.fragments import SqlQueryStep, TransformSql
from engine_spark import planned_queries
from engine_spark.planned_queries import PlannedQueries, PlannedQuery, plan_key


def _request(
    paths: list[Path], query: str = "SELECT * FROM f", alias: str = "f"
) -> ep.QueryRequest:
    return ep.QueryRequest(
        inputs=(ep.QueryInput(alias=alias, data_paths=tuple(str(p) for p in paths)),),
        transform=TransformSql(engine="spark", queries=(SqlQueryStep(query=query),)),
        output_data_path="/nowhere/result.arrow",
    )


def _parquet(path: Path, values: list[int]) -> Path:
    pq.write_table(pa.table({"v": values}), path)
    return path


def test_the_same_query_over_the_same_files_has_one_key(tmp_path: Path) -> None:
    files = [_parquet(tmp_path / "a", [1, 2]), _parquet(tmp_path / "b", [3])]
    key = plan_key(_request(files))
    assert key is not None
    assert plan_key(_request(files)) == key
    assert plan_key(_request(files, "SELECT v FROM f")) != key
    assert plan_key(_request(files, alias="g")) != key
    assert plan_key(_request(files[:1])) != key
    assert plan_key(_request(list(reversed(files)))) != key


def test_a_file_touched_grown_or_replaced_changes_the_key(tmp_path: Path) -> None:
    path = _parquet(tmp_path / "a", [1, 2])
    key = plan_key(_request([path]))
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    touched = plan_key(_request([path]))
    assert touched != key
    replacement = _parquet(tmp_path / "a.new", [3, 4])
    os.utime(replacement, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    os.replace(replacement, path)
    assert plan_key(_request([path])) not in (key, touched)


def test_no_key_for_arrow_files_missing_files_or_large_inputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    arrow = tmp_path / "a.arrow"
    table = pa.table({"v": [1]})
    with pa.OSFile(str(arrow), "wb") as sink, ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    assert plan_key(_request([arrow])) is None
    assert plan_key(_request([tmp_path / "missing"])) is None
    small = _parquet(tmp_path / "small", [1])
    assert plan_key(_request([small])) is not None
    monkeypatch.setattr(planned_queries, "SMALL_INPUT_BYTES", small.stat().st_size - 1)
    assert plan_key(_request([small])) is None


def test_the_least_recently_used_plans_go_first() -> None:
    plans = PlannedQueries(capacity=2)
    kept = [PlannedQuery(frame=object(), order=object()) for _ in range(3)]  # type: ignore[arg-type]
    plans.keep("a", kept[0])
    plans.keep("b", kept[1])
    assert plans.get("a") is kept[0]  # a is now the most recent
    plans.keep("c", kept[2])
    assert (plans.get("a"), plans.get("b"), plans.get("c")) == (kept[0], None, kept[2])
    plans.drop("a")
    assert plans.get("a") is None
    assert len(plans) == 1
