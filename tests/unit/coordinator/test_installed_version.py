"""``installed_version`` answers what ``importlib.metadata.version`` answers, without it."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import pytest

from coordinator.engine.installed import installed_version


def _metadata(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


@pytest.mark.parametrize(
    "name", ["odf-py", "odf_py", "ODF.py", "pyarrow", "pyspark", "grpcio", "pytest", "no-such-dist"]
)
def test_installed_distributions_read_as_importlib_metadata_reads_them(name: str) -> None:
    assert installed_version(name) == _metadata(name)


def test_the_first_path_entry_wins_and_odd_metadata_is_left_to_importlib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    for root, version in ((first, "1.0"), (second, "2.0")):
        info = root / f"demo_dist-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: demo-dist\nVersion: {version}\n"
        )
    broken = first / "broken-0.1.dist-info"
    broken.mkdir()
    (broken / "METADATA").write_bytes(b"Name: broken\n\nVersion: 9\n")
    (first / "egg_dist-3.0.egg-info").write_text(
        "Metadata-Version: 1.1\nName: egg-dist\nVersion: 3.0\n"
    )
    (first / "demo_dist.py").write_text("")  # a module of the same name is no metadata
    monkeypatch.setattr(sys, "path", [str(tmp_path / "missing"), str(first), str(second)])
    for name in ("demo-dist", "Demo_Dist", "broken", "egg-dist", "absent"):
        assert installed_version(name) == _metadata(name), name
    assert installed_version("demo-dist") == "1.0"
    assert installed_version("egg-dist") == "3.0"
    assert installed_version("broken") is None  # headers end at the blank line: no version
