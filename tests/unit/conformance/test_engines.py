"""Where exchange files are for the engine: the host's paths, or an image's mounts."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.cli.engine_test import parse_capabilities
from coordinator.conformance.engines import ENGINE_IN, ENGINE_OUT, ExchangeDirs


def test_an_image_sees_inputs_and_outputs_under_its_mounts(tmp_path: Path) -> None:
    dirs = ExchangeDirs(tmp_path / "in", tmp_path / "out", ENGINE_IN, ENGINE_OUT)
    assert (
        dirs.engine_path(tmp_path / "in" / "case" / "a.parquet") == "/opt/engine/in/case/a.parquet"
    )
    assert dirs.engine_path(tmp_path / "out" / "case" / "tx-0" / "data") == (
        "/opt/engine/out/case/tx-0/data"
    )
    with pytest.raises(ValueError, match="not under the exchange directories"):
        dirs.engine_path(tmp_path / "elsewhere")


def test_a_local_engine_sees_the_host_paths(tmp_path: Path) -> None:
    dirs = ExchangeDirs.same_paths(tmp_path)
    path = tmp_path / "out" / "x" / "data"
    assert dirs.engine_path(path) == str(path)


def test_capabilities() -> None:
    assert parse_capabilities("all") is None
    assert parse_capabilities("stateful, windows,,") == frozenset({"stateful", "windows"})
