"""What ``odf set-transform`` reads before any engine runs: the new transform and inputs."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from common.odf.errors import NotFoundError, ValidationError
from common.odf.events import SetTransform
from common.odf.fragments import SqlQueryStep, TransformInput, TransformSql
from coordinator.cli.transform import read_transform, resolve_inputs
from coordinator.evolution.query_change import same_transform
from tests.unit.verify.pipeline import build_pipeline


def args(**values: object) -> argparse.Namespace:
    return argparse.Namespace(**{"query": None, "file": None, "engine": None, **values})


def test_a_query_option_is_one_sql_step() -> None:
    t = read_transform(args(query="  SELECT 1  \n"), "spark")
    assert t == TransformSql(engine="spark", query="SELECT 1")
    with pytest.raises(ValidationError, match="--query: the query is empty"):
        read_transform(args(query=" \n"), "spark")


def test_a_file_holds_sql_or_a_yaml_transform(tmp_path: Path) -> None:
    sql = tmp_path / "q.sql"
    sql.write_text("SELECT event_time FROM a\n")
    assert read_transform(args(file=sql), "spark").query == "SELECT event_time FROM a"
    yaml = tmp_path / "t.yaml"
    yaml.write_text(
        "kind: Sql\nengine: spark\nqueries:\n"
        "  - alias: step\n    query: SELECT * FROM a\n  - query: SELECT * FROM step\n"
    )
    t = read_transform(args(file=yaml, engine="other"), "spark")
    assert t.engine == "other"
    assert t.queries == (
        SqlQueryStep(alias="step", query="SELECT * FROM a"),
        SqlQueryStep(query="SELECT * FROM step"),
    )
    yaml.write_text("engine: spark\nquery: x\n")
    with pytest.raises(ValidationError, match=r"t\.yaml:1: kind: missing required field"):
        read_transform(args(file=yaml), "spark")
    with pytest.raises(ValidationError, match=r"nope\.sql: no such file"):
        read_transform(args(file=tmp_path / "nope.sql"), "spark")


def test_inputs_are_resolved_to_ids_with_aliases(tmp_path: Path) -> None:
    p = build_pipeline(tmp_path)
    root_did = p.root.id.to_did()
    assert resolve_inputs(p.ws, ["root", "r2=root"]) == (
        TransformInput(dataset_ref=root_did, alias="root"),
        TransformInput(dataset_ref=root_did, alias="r2"),
    )
    with pytest.raises(ValidationError, match="--input: two inputs have the same alias"):
        resolve_inputs(p.ws, ["root", "root=derived"])
    with pytest.raises(NotFoundError, match="'missing' not found"):
        resolve_inputs(p.ws, ["missing"])


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
