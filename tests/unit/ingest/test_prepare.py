"""Prepare steps on real files: gzip, zip (subPath), Pipe through real commands."""

from __future__ import annotations

import gzip
import sys
import zipfile
from pathlib import Path

import pytest

from common.odf.fragments import CompressionFormat, PrepStepDecompress, PrepStepPipe
from coordinator.ingest.errors import ProcessError, ReadError
from coordinator.ingest.prepare import prepare

GZIP = PrepStepDecompress(format=CompressionFormat.GZIP)


def zip_of(tmp_path: Path, members: dict[str, str]) -> Path:
    path = tmp_path / "in.zip"
    with zipfile.ZipFile(path, "w") as z:
        for name, content in members.items():
            z.writestr(name, content)
    return path


def test_no_steps_reads_the_file_in_place(tmp_path: Path) -> None:
    source = tmp_path / "a.csv"
    source.write_text("x")
    assert prepare((), source, tmp_path, name="a.csv") == source


def test_gzip_reads_every_member(tmp_path: Path) -> None:
    source = tmp_path / "a.csv.gz"
    source.write_bytes(gzip.compress(b"a,1\n") + gzip.compress(b"b,2\n"))
    out = prepare((GZIP,), source, tmp_path, name="a.csv.gz")
    assert out.read_bytes() == b"a,1\nb,2\n"
    assert source.exists()


def test_gzip_garbage(tmp_path: Path) -> None:
    source = tmp_path / "a.gz"
    source.write_bytes(b"plain text")
    with pytest.raises(ReadError, match=r"a.gz \(prepare\[0\]\): not a valid gzip file"):
        prepare((GZIP,), source, tmp_path, name="a.gz")


@pytest.mark.parametrize(
    ("sub_path", "content"),
    [(None, "first"), ("dir/b.csv", "second"), ("*/c.*", "third")],
)
def test_zip_member_selection(tmp_path: Path, sub_path: str | None, content: str) -> None:
    archive = zip_of(tmp_path, {"a.csv": "first", "dir/b.csv": "second", "dir/c.txt": "third"})
    step = PrepStepDecompress(format=CompressionFormat.ZIP, sub_path=sub_path)
    assert prepare((step,), archive, tmp_path, name="in.zip").read_text() == content


def test_zip_sub_path_must_match_one_member(tmp_path: Path) -> None:
    archive = zip_of(tmp_path, {"a.csv": "1", "b.csv": "2"})
    step = PrepStepDecompress(format=CompressionFormat.ZIP, sub_path="*.csv")
    with pytest.raises(ReadError, match=r"matched: a\.csv, b\.csv"):
        prepare((step,), archive, tmp_path, name="in.zip")
    with pytest.raises(ReadError, match="not a valid zip file"):
        prepare((step,), _garbage(tmp_path), tmp_path, name="x")


def _garbage(tmp_path: Path) -> Path:
    path = tmp_path / "garbage.zip"
    path.write_bytes(b"garbage")
    return path


def test_pipe_and_chaining(tmp_path: Path) -> None:
    source = tmp_path / "a.gz"
    source.write_bytes(gzip.compress(b"b\nc\na\n"))
    steps = (GZIP, PrepStepPipe(command=("sort",)), PrepStepPipe(command=("tr", "a-z", "A-Z")))
    out = prepare(steps, source, tmp_path, name="a.gz")
    assert out.read_text() == "A\nB\nC\n"
    assert sorted(p.name for p in tmp_path.glob("prepared-*")) == [out.name]


def test_pipe_failure_names_the_command_and_its_stderr(tmp_path: Path) -> None:
    source = tmp_path / "a.txt"
    source.write_text("x")
    failing = PrepStepPipe(
        command=(sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)")
    )
    with pytest.raises(ProcessError, match="exited with code 3: boom"):
        prepare((failing,), source, tmp_path, name="a.txt")
    with pytest.raises(ProcessError, match="cannot run 'no-such-command-xyz'"):
        prepare((PrepStepPipe(command=("no-such-command-xyz",)),), source, tmp_path, name="a")
