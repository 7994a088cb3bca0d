"""The engine image builds reproducibly: two builds of one tree give the same image digest.

scripts/build-images.sh builds the engine image alone (``ONLY=engine``) twice into a test
repository, each time from scratch (``FORCE_BUILD=1 NO_CACHE=1``: no layer reused), with its
records written outside the tree. Both builds run on the same base image and within minutes of
each other, so the Debian mirror serves the same packages; the Python dependencies come from
the hash-pinned lock files, and every file and the image's creation time carry the commit's
``SOURCE_DATE_EPOCH``. About 2 x 3-4 minutes on this machine (apt and pip downloads, the
pyspark sdist's build): the slowest test of the tier, kept to this one build pair.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import cannot_run_containers
from tests.support.images import BuiltImage, build_engine_image

pytestmark = [pytest.mark.containerized, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]
TEST_REPOSITORY = "localhost/odf-engine-spark-repro-test"


def _source_date_epoch() -> str:
    """The last commit's time, read once: a commit between the builds must not change it."""
    out = subprocess.run(
        ["git", "log", "-1", "--format=%ct"], cwd=REPO, capture_output=True, text=True, check=False
    )
    return out.stdout.strip() or "0"


def _build(record_root: Path, epoch: str) -> BuiltImage:
    env = {
        "SOURCE_DATE_EPOCH": epoch,
        "ONLY": "engine",
        "FORCE_BUILD": "1",
        "NO_CACHE": "1",
        "ENGINE_IMAGE_REPO": TEST_REPOSITORY,
        "RECORD_ROOT": str(record_root),
    }
    return build_engine_image(record_root, env)


def test_two_builds_from_scratch_give_one_digest(tmp_path: Path) -> None:
    reason = cannot_run_containers()
    if reason:
        pytest.skip(reason)
    epoch = _source_date_epoch()
    first = _build(tmp_path / "first", epoch)
    second = _build(tmp_path / "second", epoch)
    try:
        assert first.ref == second.ref  # same inputs, same tag
        assert first.image_id == second.image_id
        assert first.digest == second.digest
    finally:
        for ref in (first.ref, f"{TEST_REPOSITORY}:latest"):
            subprocess.run(["podman", "rmi", "-f", ref], capture_output=True, check=False)
