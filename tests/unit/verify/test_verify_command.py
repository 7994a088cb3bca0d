"""``odf verify --integrity`` in-process: the report, JSON, exit codes and stderr lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coordinator.cli import main
from tests.unit.verify.pipeline import Pipeline, build_pipeline


@pytest.fixture
def p(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Pipeline:
    pipeline = build_pipeline(tmp_path)
    monkeypatch.chdir(tmp_path)
    return pipeline


def test_recursive_integrity_report(p: Pipeline, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--integrity", "--recursive", "--wide", "derived"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == ["dataset", "block", "hash", "event", "offsets", "integrity",
                                "replay", "detail"]  # fmt: skip
    rows = [line.split() for line in lines[1:5]]
    assert [r[0] for r in rows] == ["root", "root", "derived", "derived"]  # inputs first
    assert rows[2][2:] == [str(p.derived_blocks[3]), "ExecuteTransform", "0..4", "ok", "skipped"]
    assert "root: ok (4 blocks, 2 transactions, 0 replayed)" in out
    assert "derived: ok (5 blocks, 2 transactions, 0 replayed)" in out


def test_json_report(p: Pipeline, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--integrity", "-o", "json", "derived"]) == 0
    (doc,) = json.loads(capsys.readouterr().out)
    assert (doc["dataset"], doc["ok"], doc["kind"], doc["head"]) == (
        "derived",
        True,
        "Derivative",
        str(p.derived_blocks[-1]),
    )
    assert [t["sequenceNumber"] for t in doc["transactions"]] == [3, 4]
    assert doc["transactions"][1]["offsetInterval"] == {"start": 5, "end": 9}


def test_a_problem_fails_the_command_naming_the_block(
    p: Pipeline, capsys: pytest.CaptureFixture[str]
) -> None:
    p.root.layout.head_ref_path.write_text(p.root_blocks[2].to_multibase())
    assert main(["verify", "--integrity", "-r", "derived"]) == 1
    captured = capsys.readouterr()
    errors = captured.err.splitlines()
    assert errors[0].startswith("mismatch: root: refs/head: names block 2")
    assert errors[1].startswith(f"mismatch: derived: block 4 ({p.derived_blocks[4]}):")
    assert errors[-1] == "error: verification failed: 2 problem(s) in root, derived"
    assert "root: FAILED, 1 problem (" in captured.out
    assert "head: names block 2" in captured.out  # the refs/head row of the table


def test_json_report_of_a_failure(p: Pipeline, capsys: pytest.CaptureFixture[str]) -> None:
    event = p.root.get_block(p.root_blocks[2]).event
    new_data = getattr(event, "new_data", None)
    assert new_data is not None
    p.root.data_path(new_data.physical_hash).unlink()
    assert main(["verify", "--integrity", "-o", "json", "root"]) == 1
    (doc,) = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False
    (problem,) = doc["problems"]
    assert (problem["check"], problem["sequenceNumber"], problem["hash"]) == (
        "data",
        2,
        str(p.root_blocks[2]),
    )
    assert doc["transactions"][0]["integrity"] == "FAILED"
    assert doc["transactions"][0]["problems"] == [problem]


def test_a_damaged_unrelated_dataset_does_not_hide_inputs(
    p: Pipeline, capsys: pytest.CaptureFixture[str]
) -> None:
    """Inputs are found by id even when another dataset cannot be opened normally."""
    broken = p.ws.datasets_dir / "aaa"
    (broken / "refs").mkdir(parents=True)
    (broken / "refs" / "head").write_text("not a hash")
    assert main(["verify", "--integrity", "-r", "derived"]) == 0
    assert "derived: ok" in capsys.readouterr().out
    assert main(["verify", "--integrity", "aaa"]) == 1
    assert "mismatch: aaa: refs/head: is not a multihash" in capsys.readouterr().err
