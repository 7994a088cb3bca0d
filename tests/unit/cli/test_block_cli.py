"""``odf block hash`` and ``odf block decode``."""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
from pathlib import Path

import pytest

from common.serde import flatbuffers_codec
from common.serde.yaml_codec import load_block_manifest
from coordinator.cli import main
from tests.unit.serde.test_yaml_reference import SET_DATA_SCHEMA_BLOCK

# The text is kamu's: the expected YAML of serde_set_data_schema in kamu-cli f92b4f25d
# src/domain/opendatafabric/tests/tests/test_serde_yaml.rs (sequence number 123), kept with its
# source in the YAML reference tests. kamu states no hash for it. SET_DATA_SCHEMA_HASH is
# self-derived, pinned to detect change (our encoder's output; the serialization guide,
# section 8, lists it as "Derived value, not an upstream vector").
SET_DATA_SCHEMA_HASH = "f16200fddaca15aebd849e2be5f14dfc6bbcce9dc5feaca1a88d330d79286efdce553"

# The same event in kamu's FlatBuffers test block (sequence number 117). The YAML text is
# written here; the hash is upstream: kamu-cli f92b4f25d,
# src/domain/opendatafabric/tests/tests/test_serde_flatbuffers.rs (serde_set_data_schema).
SET_DATA_SCHEMA_117_BLOCK = SET_DATA_SCHEMA_BLOCK.replace(
    "sequenceNumber: 123", "sequenceNumber: 117"
)
SET_DATA_SCHEMA_117_HASH = "f162044d64d764fb207713407b9a761566409404c907f765993105608299cd6f5bebf"

# kamu's SetInfo block from its metadata block repository tests: kamu-cli f92b4f25d,
# src/infra/core/tests/tests/repos/test_metadata_block_repository_shared.rs (create_block; a
# 112-byte block, 68 bytes of content). The YAML text is written here; the hash is upstream.
SET_INFO_BLOCK = """\
kind: MetadataBlock
version: 2
content:
  systemTime: 2050-01-01T12:00:00Z
  sequenceNumber: 0
  event:
    kind: SetInfo
    description: foo
"""
SET_INFO_HASH = "f16205603b882241c71351baf996d6dba7e3ddbd571457e93c1cd282bdc61f9fed5f2"


@pytest.fixture
def yaml_block(tmp_path: Path) -> Path:
    path = tmp_path / "block.yaml"
    path.write_text(SET_DATA_SCHEMA_BLOCK)
    return path


@pytest.fixture
def binary_block(tmp_path: Path) -> Path:
    path = tmp_path / "block.bin"
    path.write_bytes(flatbuffers_codec.encode_block(load_block_manifest(SET_DATA_SCHEMA_BLOCK)))
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def feed_stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [(SET_DATA_SCHEMA_117_BLOCK, SET_DATA_SCHEMA_117_HASH), (SET_INFO_BLOCK, SET_INFO_HASH)],
    ids=["SetDataSchema", "SetInfo"],
)
def test_hash_of_yaml_manifest_matches_the_reference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], manifest: str, expected: str
) -> None:
    path = tmp_path / "block.yaml"
    path.write_text(manifest)
    assert run(capsys, "block", "hash", str(path)) == (0, expected + "\n", "")


def test_hash_of_kamus_yaml_manifest_is_pinned(
    yaml_block: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kamu's YAML text; the hash is self-derived (see SET_DATA_SCHEMA_HASH)."""
    assert run(capsys, "block", "hash", str(yaml_block)) == (0, SET_DATA_SCHEMA_HASH + "\n", "")


def test_hash_reads_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    feed_stdin(monkeypatch, SET_DATA_SCHEMA_BLOCK.encode())
    assert run(capsys, "block", "hash", "-") == (0, SET_DATA_SCHEMA_HASH + "\n", "")


def test_hash_of_binary_block_is_over_its_stored_bytes(
    binary_block: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = "f1620" + hashlib.sha3_256(binary_block.read_bytes()).hexdigest()
    assert expected == SET_DATA_SCHEMA_HASH
    assert run(capsys, "block", "hash", "--binary", str(binary_block)) == (0, expected + "\n", "")


def test_hash_of_binary_block_from_stdin(
    binary_block: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    feed_stdin(monkeypatch, binary_block.read_bytes())
    assert run(capsys, "block", "hash", "--binary", "-") == (0, SET_DATA_SCHEMA_HASH + "\n", "")


def test_hash_of_version_3_manifest_uses_the_aligned_layout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    block = load_block_manifest(SET_DATA_SCHEMA_BLOCK)
    v3 = flatbuffers_codec.encode_block(block, version=3)
    path = tmp_path / "v3.yaml"
    path.write_text(SET_DATA_SCHEMA_BLOCK.replace("version: 2", "version: 3"))
    code, out, _ = run(capsys, "block", "hash", str(path))
    assert (code, out) == (0, flatbuffers_codec.block_hash(v3).to_multibase() + "\n")
    assert out.strip() != SET_DATA_SCHEMA_HASH


def test_decode_prints_the_yaml_manifest(
    binary_block: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "block", "decode", str(binary_block)) == (0, SET_DATA_SCHEMA_BLOCK, "")


def test_decode_reads_stdin(
    binary_block: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    feed_stdin(monkeypatch, binary_block.read_bytes())
    assert run(capsys, "block", "decode", "-") == (0, SET_DATA_SCHEMA_BLOCK, "")


def test_decode_keeps_the_manifest_version_so_the_hash_round_trips(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    v3 = tmp_path / "v3.bin"
    v3.write_bytes(
        flatbuffers_codec.encode_block(load_block_manifest(SET_DATA_SCHEMA_BLOCK), version=3)
    )
    code, printed, _ = run(capsys, "block", "decode", str(v3))
    assert code == 0
    assert printed == SET_DATA_SCHEMA_BLOCK.replace("version: 2", "version: 3")
    printed_path = tmp_path / "v3.yaml"
    printed_path.write_text(printed)
    via_yaml = run(capsys, "block", "hash", str(printed_path))
    assert via_yaml == run(capsys, "block", "hash", "--binary", str(v3))


def one_error_line(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code, out, err = run(capsys, *argv)
    assert code == 1
    assert out == ""
    assert err.endswith("\n")
    assert err.count("\n") == 1
    assert err.startswith("error: ")
    return err.strip()


def test_invalid_yaml_field_names_file_line_and_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(SET_DATA_SCHEMA_BLOCK.replace("sequenceNumber: 123", "sequenceNumber: x"))
    assert one_error_line(capsys, "block", "hash", str(path)) == (
        f"error: {path}:6: sequenceNumber: expected an integer (uint64), got string 'x'"
    )


def test_yaml_syntax_error_names_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("kind: MetadataBlock\nversion: [2\n")
    err = one_error_line(capsys, "block", "hash", str(path))
    assert err.startswith(f"error: {path}:3:1: invalid YAML: ")


def test_binary_file_without_binary_flag(
    binary_block: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = one_error_line(capsys, "block", "hash", str(binary_block))
    assert err == f"error: {binary_block}: not a UTF-8 text file; for a binary block use --binary"


def test_yaml_file_given_as_binary(yaml_block: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = one_error_line(capsys, "block", "decode", str(yaml_block))
    assert err.startswith(f"error: {yaml_block}: ")
    assert err.endswith("(this looks like a YAML manifest)")


@pytest.mark.parametrize("command", [["hash", "--binary"], ["decode"]])
def test_truncated_binary_block(
    binary_block: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    truncated = tmp_path / "truncated.bin"
    truncated.write_bytes(binary_block.read_bytes()[:100])
    err = one_error_line(capsys, "block", *command, str(truncated))
    assert err.startswith(f"error: {truncated}: ")


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.yaml"
    assert one_error_line(capsys, "block", "hash", str(missing)) == (
        f"error: {missing}: No such file or directory"
    )


@pytest.mark.e2e
def test_console_script_hashes_stdin_and_reports_errors() -> None:
    odf = Path(sys.executable).with_name("odf")
    assert odf.exists(), f"the odf console script is not installed next to {sys.executable}"
    ok = subprocess.run(
        [str(odf), "block", "hash", "-"],
        input=SET_DATA_SCHEMA_BLOCK.encode(),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, SET_DATA_SCHEMA_HASH.encode() + b"\n", b"")
    bad = subprocess.run(
        [str(odf), "block", "hash", "-"],
        input=b"kind: MetadataBlock\nversion: 1\n",
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert bad.returncode == 1
    assert bad.stdout == b""
    assert bad.stderr == (
        b"error: <stdin>:2: version: MetadataBlock manifest version 1 is not supported "
        b"(supported: 2, 3)\n"
    )
