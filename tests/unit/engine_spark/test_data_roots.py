"""Path confinement: which paths each request names, and which of them lie under the roots."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from common.odf import engine_protocol as ep
from common.odf.fragments import DatasetVocabulary, TransformSql
from engine_spark.data_roots import (
    NO_DATA_ROOTS,
    DataRoots,
    PathOutsideRootsError,
    request_paths,
)
from engine_spark.warm_up import one_input_request

SQL = TransformSql(engine="spark", query="select 1")


def transform_request(root: Path) -> ep.TransformRequest:
    return one_input_request(
        SQL,
        "in",
        (str(root / "in" / "a"), str(root / "in" / "b")),
        root / "out",
        system_time=datetime(2024, 1, 1, tzinfo=UTC),
        offsets=None,
        schema_file=str(root / "in" / "schema"),
        prev_checkpoint_path=str(root / "in" / "cp"),
    )


def test_every_path_of_a_transform_request_is_named_by_its_field(tmp_path: Path) -> None:
    fields = [field for field, _ in request_paths(transform_request(tmp_path))]
    assert fields == [
        "query_inputs[0].data_paths[0]",
        "query_inputs[0].data_paths[1]",
        "query_inputs[0].schema_file",
        "prev_checkpoint_path",
        "new_checkpoint_path",
        "new_data_path",
    ]


def test_query_and_raw_query_paths(tmp_path: Path) -> None:
    query = ep.QueryRequest(
        inputs=(ep.QueryInput(alias="a", data_paths=("/d/1", "/d/2")),),
        transform=SQL,
        output_data_path="/o/out",
    )
    assert list(request_paths(query)) == [
        ("inputs[0].data_paths[0]", "/d/1"),
        ("inputs[0].data_paths[1]", "/d/2"),
        ("output_data_path", "/o/out"),
    ]
    raw = ep.RawQueryRequest(input_data_paths=("/i",), transform=SQL, output_data_path="/o")
    assert list(request_paths(raw)) == [("input_data_paths[0]", "/i"), ("output_data_path", "/o")]


def test_paths_under_the_roots_pass(tmp_path: Path) -> None:
    roots = DataRoots.of([str(tmp_path / "in"), str(tmp_path / "out")])
    roots.check_request(transform_request(tmp_path))


def test_a_path_outside_is_refused_with_its_field(tmp_path: Path) -> None:
    roots = DataRoots.of([str(tmp_path / "in")])
    with pytest.raises(PathOutsideRootsError, match=r"new_checkpoint_path .*/out/checkpoint"):
        roots.check_request(transform_request(tmp_path))


@pytest.mark.parametrize(
    "relative",
    ["../etc/passwd", "in/../../escape", "in/x/../../../escape"],
)
def test_dot_dot_cannot_leave_a_root(tmp_path: Path, relative: str) -> None:
    roots = DataRoots.of([str(tmp_path / "root" / "in")])
    with pytest.raises(PathOutsideRootsError, match="outside the engine's data roots"):
        roots.check("new_data_path", str(tmp_path / "root" / "in" / relative))


def test_a_symlink_inside_a_root_to_outside_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "link").symlink_to(tmp_path / "elsewhere")
    roots = DataRoots.of([str(root)])
    with pytest.raises(PathOutsideRootsError, match=r"resolves to .*/elsewhere/data"):
        roots.check("new_data_path", str(root / "link" / "data"))


def test_a_root_that_is_a_symlink_is_resolved(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    roots = DataRoots.of([str(tmp_path / "alias")])
    roots.check("new_data_path", str(tmp_path / "real" / "data"))
    roots.check("new_data_path", str(tmp_path / "alias" / "data"))


def test_a_sibling_with_the_root_as_prefix_is_outside(tmp_path: Path) -> None:
    roots = DataRoots.of([str(tmp_path / "data")])
    with pytest.raises(PathOutsideRootsError):
        roots.check("output_data_path", str(tmp_path / "data-evil" / "x"))


def test_relative_paths_are_refused(tmp_path: Path) -> None:
    roots = DataRoots.of([os.getcwd()])
    with pytest.raises(PathOutsideRootsError, match="not an absolute path"):
        roots.check("output_data_path", "out/x")


def test_without_roots_every_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PathOutsideRootsError, match=r"none \(start it with --data-root\)"):
        NO_DATA_ROOTS.check_request(transform_request(tmp_path))


def test_validate_requests_name_no_paths() -> None:
    request = ep.ValidateQueryRequest(
        dataset_alias="x", vocab=DatasetVocabulary(), transform=SQL, query_inputs=()
    )
    NO_DATA_ROOTS.check_request(request)


def test_migrate_requests_are_checked_like_transforms(tmp_path: Path) -> None:
    t = transform_request(tmp_path)
    migrate = ep.MigrateQueryRequest(
        dataset_id=t.dataset_id,
        dataset_alias=t.dataset_alias,
        system_time=t.system_time,
        vocab=t.vocab,
        prev_transform=SQL,
        new_transform=SQL,
        query_inputs=t.query_inputs,
        next_offset=0,
        new_checkpoint_path=t.new_checkpoint_path,
        new_data_path="/elsewhere/data",
    )
    roots = DataRoots.of([str(tmp_path)])
    roots.check_request(replace(migrate, new_data_path=str(tmp_path / "data")))
    with pytest.raises(PathOutsideRootsError, match="new_data_path /elsewhere/data"):
        roots.check_request(migrate)


def test_split_requests_name_their_inputs_and_slices_dir(tmp_path: Path) -> None:
    split = ep.SplitTransformRequest(
        request=transform_request(tmp_path),
        slices=2,
        min_records_per_slice=1,
        slices_dir="/elsewhere/slices",
    )
    assert [field for field, _ in request_paths(split)] == [
        "request.query_inputs[0].data_paths[0]",
        "request.query_inputs[0].data_paths[1]",
        "request.query_inputs[0].schema_file",
        "request.prev_checkpoint_path",
        "slices_dir",
    ]
    with pytest.raises(PathOutsideRootsError, match="slices_dir"):
        DataRoots.of([str(tmp_path)]).check_request(split)
