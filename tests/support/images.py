"""Images built by scripts/build-images.sh, as tests and benchmarks find them."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from coordinator.engine.container_runtime import ContainerRuntimeUnavailable

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class BuiltImage:
    """An image recorded by scripts/build-images.sh (``images/<name>/.built/``)."""

    ref: str
    digest: str
    image_id: str

    @classmethod
    def load(cls, built_dir: Path) -> BuiltImage:
        try:
            ref, digest, image_id = (
                (built_dir / name).read_text().strip() for name in ("image", "digest", "id")
            )
        except FileNotFoundError as e:
            raise ContainerRuntimeUnavailable(
                f"{e.filename} missing: build the images with scripts/build-images.sh"
            ) from None
        return cls(ref=ref, digest=digest, image_id=image_id)

    @property
    def engine_config(self) -> str:
        """A workspace's ``.odf/config.yaml`` running its engine in this image."""
        return f"engine:\n  provider: container\n  image: {self.ref}\n"

    def pinned_ref(self) -> str:
        """``repository@sha256:...``: the reference that names exactly this image."""
        return f"{self.ref.rsplit(':', 1)[0]}@{self.digest}"


def build_engine_image(
    record_root: Path = REPO, env: Mapping[str, str] | None = None
) -> BuiltImage:
    """Run scripts/build-images.sh (``env`` over this process's environment) and load the engine
    image it records under ``record_root``; the test fails, with the script's output tail, when
    the build does."""
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "build-images.sh")],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(
            f"scripts/build-images.sh failed:\n{result.stdout[-2000:]}{result.stderr[-4000:]}"
        )
    return BuiltImage.load(record_root / "images" / "engine-spark" / ".built")
