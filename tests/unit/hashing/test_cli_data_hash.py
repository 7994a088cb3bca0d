"""``odf data hash FILE [--physical]`` through ``coordinator.cli.main``."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coordinator.cli import main

KAMU_VECTOR = "f9680c001200b3483eecc3d5c6b50ee6b8cba11b51c08f89ea1f53d3a334c743199f5fe656e"


@pytest.fixture
def population(tmp_path: Path) -> Path:
    path = tmp_path / "population.parquet"
    table = pa.table(
        {
            "offset": pa.array([1, 0], pa.int64()),
            "city": pa.array(["B", "A"]),
            "population": pa.array([200, 100], pa.uint64()),
        }
    )
    pq.write_table(table, path)
    return path


def test_prints_the_logical_hash(population: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["data", "hash", str(population)]) == 0
    out, err = capsys.readouterr()
    assert (out, err) == (KAMU_VECTOR + "\n", "")


def test_prints_the_physical_hash(population: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["data", "hash", "--physical", str(population)]) == 0
    out, err = capsys.readouterr()
    assert out == "f1620" + hashlib.sha3_256(population.read_bytes()).hexdigest() + "\n"
    assert err == ""


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "missing.parquet: no such file"),
        (b"PAR1 but not really", "bad.parquet: not a readable Parquet file"),
        ("duration", "column 'took': type duration[s] is not supported by the logical hash"),
    ],
)
def test_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes | str | None, message: str
) -> None:
    if content is None:
        path = tmp_path / "missing.parquet"
    elif content == "duration":
        path = tmp_path / "took.parquet"
        pq.write_table(pa.table({"took": pa.array([5], pa.duration("s"))}), path)
    else:
        path = tmp_path / "bad.parquet"
        path.write_bytes(content if isinstance(content, bytes) else b"")
    assert main(["data", "hash", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("error: ")
    assert message in err


def test_physical_hash_of_a_missing_file_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["data", "hash", "--physical", str(tmp_path / "nope")]) == 1
    assert "nope: no such file" in capsys.readouterr().err
