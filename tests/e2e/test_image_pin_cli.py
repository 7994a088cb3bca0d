"""Embedded mode pins transforms to the engine image built from the same inputs.

With the engine image built from this tree (scripts/build-images.sh records its sources digest
in images/engine-spark/.built/) and the locked libraries installed, ``odf add`` in embedded
mode pins ``SetTransform.version`` to that image's ``repository@sha256:...``; ``odf verify``
replays with the embedded engine, and in container mode with that very image, and says which.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.engine.image_pin import recorded_image
from coordinator.engine.version import build_version
from tests.support.cli import ok
from tests.support.datasets import derivative, root
from tests.support.images import BuiltImage
from tests.support.workspace import add, ingest, new_workspace

pytestmark = [pytest.mark.e2e, pytest.mark.containerized]

REPO = Path(__file__).resolve().parents[2]
CITIES = root("cities", ["event_time TIMESTAMP", "city STRING", "population BIGINT"])
BIG = derivative(
    "big", "SELECT event_time, city, population FROM cities WHERE population > 1000", ["cities"]
)
BATCH = "event_time,city,population\n2024-01-01T00:00:00Z,A,500\n2024-01-02T00:00:00Z,B,5000\n"


def test_embedded_pin_is_the_image_and_verifies_in_both_modes(
    engine_image: BuiltImage, tmp_path: Path
) -> None:
    pinned = engine_image.pinned_ref()
    assert recorded_image(REPO) == pinned, "the installed libraries are not the locked ones"
    ws = new_workspace(tmp_path / "ws")
    add(ws, CITIES, BIG)
    ingest(ws, "cities", BATCH)
    ok(ws, "pull", "big")
    assert f"version={pinned}" in ok(ws, "log", "big")
    assert pinned != build_version()

    out = ok(ws, "verify", "big")
    assert "big: ok (" in out
    assert f"1 replayed), with engine embedded {pinned}\n" in out

    config = engine_image.engine_config
    (ws / ".odf" / "config.yaml").write_text(config)
    out = ok(ws, "verify", "big")
    assert "big: ok (" in out
    assert f"1 replayed), with engine container {pinned}\n" in out
