"""What ``odf set-transform`` reads before any engine runs: the new transform and inputs."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from common.odf.errors import NotFoundError, ValidationError
from common.odf.events import SetTransform
from common.odf.fragments import SqlQueryStep, TransformInput, TransformSql
from coordinator.app import Application
from coordinator.app.application import new_transform
from coordinator.cli.transform import read_transform
from coordinator.evolution.query_change import same_transform
from tests.unit.verify.pipeline import build_pipeline


def args(**values: object) -> argparse.Namespace:
    return argparse.Namespace(**{"query": None, "file": None, "engine": None, **values})


def transform(a: argparse.Namespace, current_engine: str | None = "spark") -> TransformSql:
    """What ``odf set-transform`` makes of its options."""
    return new_transform(read_transform(a), engine=a.engine, current_engine=current_engine)


def test_a_query_option_is_one_sql_step() -> None:
    t = transform(args(query="  SELECT 1  \n"))
    assert t == TransformSql(engine="spark", query="SELECT 1")
    assert transform(args(query="SELECT 1"), current_engine="flink").engine == "flink"
    assert transform(args(query="SELECT 1", engine="x"), current_engine="flink").engine == "x"
    with pytest.raises(ValidationError, match="--query: the query is empty"):
        read_transform(args(query=" \n"))


def test_a_file_holds_sql_or_a_yaml_transform(tmp_path: Path) -> None:
    sql = tmp_path / "q.sql"
    sql.write_text("SELECT event_time FROM a\n")
    assert transform(args(file=sql)).query == "SELECT event_time FROM a"
    yaml = tmp_path / "t.yaml"
    yaml.write_text(
        "kind: Sql\nengine: spark\nqueries:\n"
        "  - alias: step\n    query: SELECT * FROM a\n  - query: SELECT * FROM step\n"
    )
    assert transform(args(file=yaml)).engine == "spark"
    t = transform(args(file=yaml, engine="other"))
    assert t.engine == "other"
    assert t.queries == (
        SqlQueryStep(alias="step", query="SELECT * FROM a"),
        SqlQueryStep(query="SELECT * FROM step"),
    )
    yaml.write_text("engine: spark\nquery: x\n")
    with pytest.raises(ValidationError, match=r"t\.yaml:1: kind: missing required field"):
        read_transform(args(file=yaml))
    with pytest.raises(ValidationError, match=r"nope\.sql: no such file"):
        read_transform(args(file=tmp_path / "nope.sql"))


def test_inputs_are_resolved_to_ids_with_aliases(tmp_path: Path) -> None:
    p = build_pipeline(tmp_path)
    root_did = p.root.id.to_did()
    resolve_inputs = Application(p.ws).resolve_inputs
    assert resolve_inputs(["root", "r2=root"]) == (
        TransformInput(dataset_ref=root_did, alias="root"),
        TransformInput(dataset_ref=root_did, alias="r2"),
    )
    with pytest.raises(ValidationError, match="--input: two inputs have the same alias"):
        resolve_inputs(["root", "root=derived"])
    with pytest.raises(NotFoundError, match="'missing' not found"):
        resolve_inputs(["missing"])


def test_whitespace_in_queries_is_no_change() -> None:
    inputs = (TransformInput(dataset_ref="did:odf:x", alias="a"),)
    a = SetTransform(
        inputs=inputs,
        transform=TransformSql(engine="spark", queries=(SqlQueryStep(query="SELECT 1\n"),)),
    )
    b = SetTransform(inputs=inputs, transform=TransformSql(engine="spark", query="SELECT  1"))
    assert same_transform(a, b)
    c = SetTransform(inputs=inputs, transform=TransformSql(engine="spark", query="SELECT 2"))
    assert not same_transform(a, c)
    other_inputs = SetTransform(inputs=(), transform=a.transform)
    assert not same_transform(a, other_inputs)
