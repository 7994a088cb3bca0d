"""The engine image builds reproducibly: two builds of one tree give the same image digest.

scripts/build-images.sh builds the engine image alone (``ONLY=engine``) into a test repository
from scratch (``FORCE_BUILD=1 NO_CACHE=1``: no layer reused), with its records written outside
the tree. The other build of the pair is the tree's own engine image when ``make test`` built it
in the last hours from scratch with the same ``SOURCE_DATE_EPOCH`` (its ``.built/build`` record
says so: ``make test`` builds it with ``ENGINE_NO_CACHE=1``) and from the same inputs (files
edited since make a second build from scratch); otherwise a second build from scratch. Both
builds run on the same base image and within hours of each other, so the Debian mirror serves
the same packages; the Python dependencies come from the hash-pinned lock files, and every file
and the image's creation time carry the commit's ``SOURCE_DATE_EPOCH``. About 3-4 minutes a
build on this machine (apt and pip downloads, the pyspark sdist's build): the slowest test of
the tier, kept to one build when it can.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import cannot_run_containers
from tests.support.images import BuiltImage, build_engine_image

pytestmark = [pytest.mark.containerized, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]
TEST_REPOSITORY = "localhost/odf-engine-spark-repro-test"
TREE_RECORD = REPO / "images" / "engine-spark" / ".built"
RECENT = 6 * 3600
"""How old the tree's own build may be to stand as the first of the pair (the Debian mirror's
packages change over days, not hours)."""


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


def _recent_tree_build(epoch: str) -> BuiltImage | None:
    """The tree's engine image when this machine built it from scratch (no cached layer
    reused) in the last hours from the same commit time, else None."""
    try:
        ref, built_epoch, finished, scratch = (TREE_RECORD / "build").read_text().split()
        tree = BuiltImage.load(TREE_RECORD)
    except (OSError, ValueError):
        return None
    fresh = time.time() - int(finished) < RECENT and scratch == "1"
    return tree if fresh and ref == tree.ref and built_epoch == epoch else None


def _inputs(image: BuiltImage) -> str:
    """The hash of the build's inputs (the image's tag)."""
    return image.ref.rsplit(":", 1)[1]


def test_two_builds_from_scratch_give_one_digest(tmp_path: Path) -> None:
    reason = cannot_run_containers()
    if reason:
        pytest.skip(reason)
    epoch = _source_date_epoch()
    second = _build(tmp_path / "second", epoch)
    tree = _recent_tree_build(epoch)
    if tree is not None and _inputs(tree) != _inputs(second):
        tree = None  # the tree's files changed since its build: not the same inputs
    first = tree or _build(tmp_path / "first", epoch)
    try:
        assert _inputs(first) == _inputs(second)
        assert first.image_id == second.image_id
        assert first.digest == second.digest
    finally:
        # The test's names only: the second build is the tree's own image (same ID) when the
        # first is the tree's build, and the suite's later tests run that image. The test's
        # own images are removed (by ID, unforced: refused while another name is left).
        for ref in {first.ref, second.ref, f"{TEST_REPOSITORY}:latest"}:
            if ref.startswith(TEST_REPOSITORY):
                subprocess.run(["podman", "untag", ref, ref], capture_output=True, check=False)
        for image_id in {first.image_id, second.image_id} - {tree.image_id if tree else ""}:
            subprocess.run(["podman", "rmi", image_id], capture_output=True, check=False)
