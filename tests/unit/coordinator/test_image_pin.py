"""Pinning the embedded engine to the engine image built from the same inputs (image_pin)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from coordinator.engine.image_pin import (
    ENGINE_IMAGE_INPUTS,
    lock_mismatches,
    lock_versions,
    parse_records,
    recorded_image,
    sources_digest,
)

pytestmark = pytest.mark.process  # starts processes: out of `make test-fast`

REPO = Path(__file__).resolve().parents[3]
DIGEST = "sha256:" + "ab" * 32
SOURCES = "cd" * 32


def _bash_sources_digest(root: Path) -> str:
    """What scripts/build-images.sh computes for the same inputs."""
    script = (
        "find \"$@\" -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 |"
        " LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1"
    )
    out = subprocess.run(
        ["bash", "-c", script, "bash", *ENGINE_IMAGE_INPUTS],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def test_sources_digest_equals_the_build_scripts() -> None:
    assert sources_digest(REPO) == _bash_sources_digest(REPO)


def test_sources_digest_changes_with_any_input_and_ignores_byte_code(tmp_path: Path) -> None:
    for name in ENGINE_IMAGE_INPUTS:
        target = tmp_path / name
        if (REPO / name).is_dir():
            (target / "pkg").mkdir(parents=True)
            (target / "pkg" / "m.py").write_text("x = 1\n")
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(name)
    before = sources_digest(tmp_path)
    (tmp_path / "engine_spark" / "pkg" / "__pycache__").mkdir()
    (tmp_path / "engine_spark" / "pkg" / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"x")
    assert sources_digest(tmp_path) == before == _bash_sources_digest(tmp_path)
    (tmp_path / "images" / "engine-spark" / "requirements.lock").write_text("changed")
    assert sources_digest(tmp_path) != before


def test_records_parse_and_refuse_malformed_lines() -> None:
    text = f"# comment\n{SOURCES} localhost/odf-engine-spark@{DIGEST} sha256:{'ef' * 32}\n"
    assert parse_records(text) == {SOURCES: f"localhost/odf-engine-spark@{DIGEST}"}
    with pytest.raises(ValueError, match=r"digests.txt:1: expected"):
        parse_records(f"{SOURCES} localhost/odf-engine-spark:latest\n")
    with pytest.raises(ValueError, match=r"digests.txt:2: expected"):
        parse_records(f"\nshort localhost/odf-engine-spark@{DIGEST}\n")


def test_lock_versions_and_mismatches() -> None:
    locked = lock_versions(
        "# header\nPyArrow==26.0.1 --hash=sha256:00\npy4j==0.10.9.9 --hash=sha256:11\n"
    )
    assert locked == {"pyarrow": "26.0.1", "py4j": "0.10.9.9"}
    assert lock_mismatches(locked, {"pyarrow": "26.0.1", "py4j": "0.10.9.9"}) == []
    assert lock_mismatches(locked, {"pyarrow": "25.0.0"}) == [
        "py4j locked 0.10.9.9, installed none",
        "pyarrow locked 26.0.1, installed 25.0.0",
    ]


def _checkout(tmp_path: Path, lock: str) -> Path:
    for name in ENGINE_IMAGE_INPUTS:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, tmp_path / name)
    (tmp_path / "images" / "engine-spark" / "requirements.lock").write_text(lock)
    return tmp_path


def test_recorded_image_needs_these_sources_and_the_locked_libraries(tmp_path: Path) -> None:
    import pyarrow

    root = _checkout(tmp_path, f"pyarrow=={pyarrow.__version__} --hash=sha256:00\n")
    assert recorded_image(root) is None  # nothing recorded
    records = root / "images" / "engine-spark" / "digests.txt"
    records.write_text(f"{sources_digest(root)} localhost/odf-engine-spark@{DIGEST} x\n")
    assert recorded_image(root) == f"localhost/odf-engine-spark@{DIGEST}"
    # Another library version than the lock's: the embedded engine is not that image.
    (root / "images" / "engine-spark" / "requirements.lock").write_text(
        "pyarrow==0.0.1 --hash=sha256:00\n"
    )
    assert recorded_image(root) is None  # (its sources digest changed too)
    records.write_text(f"{sources_digest(root)} localhost/odf-engine-spark@{DIGEST} x\n")
    assert recorded_image(root) is None  # recorded, but pyarrow is not 0.0.1 here


def test_lock_lines_from_a_pip_report(tmp_path: Path) -> None:
    digest = hashlib.sha256(b"wheel").hexdigest()
    report = {
        "install": [
            {
                "metadata": {"name": "Typing_Extensions", "version": "4.16.0"},
                "download_info": {"url": "x", "archive_info": {"hashes": {"sha256": digest}}},
            },
            {
                "metadata": {"name": "bases", "version": "0.3.0"},
                "download_info": {"url": "y", "archive_info": {"hashes": {"sha256": digest}}},
            },
        ]
    }
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    script = REPO / "images" / "engine-spark" / "requirements.py"
    out = subprocess.run(
        ["python3", str(script), "lock", str(path)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out[1:] == [
        f"bases==0.3.0 --hash=sha256:{digest}",
        f"typing-extensions==4.16.0 --hash=sha256:{digest}",
    ]
    report["install"][0]["download_info"] = {"url": "file:///src", "dir_info": {}}
    path.write_text(json.dumps(report))
    failed = subprocess.run(
        ["python3", str(script), "lock", str(path)], capture_output=True, text=True, check=False
    )
    assert failed.returncode != 0
    assert failed.stderr.strip() == (
        f"lock: {path}: typing-extensions==4.16.0: the report gives no sha256 of its archive"
    )


def test_the_local_build_record_counts_too(tmp_path: Path) -> None:
    import pyarrow

    root = _checkout(tmp_path, f"pyarrow=={pyarrow.__version__} --hash=sha256:00\n")
    built = root / "images" / "engine-spark" / ".built"
    built.mkdir()
    (built / "image").write_text("localhost/odf-engine-spark:0123456789abcdef\n")
    (built / "digest").write_text(f"{DIGEST}\n")
    (built / "sources").write_text("0" * 64 + "\n")
    assert recorded_image(root) is None  # built from other sources
    (built / "sources").write_text(sources_digest(root) + "\n")
    assert recorded_image(root) == f"localhost/odf-engine-spark@{DIGEST}"


def test_the_build_script_hashes_the_same_inputs() -> None:
    script = (REPO / "scripts" / "build-images.sh").read_text()
    start = script.index("ENGINE_INPUTS=(")
    declaration = script[start : script.index(")", start) + 1]
    listed = subprocess.run(
        [
            "bash",
            "-c",
            f"ENGINE_DIR=images/engine-spark; {declaration};"
            ' printf "%s\\n" "${ENGINE_INPUTS[@]}"',
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert sorted(listed) == sorted(ENGINE_IMAGE_INPUTS)
