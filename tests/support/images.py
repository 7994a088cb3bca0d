"""Images built by scripts/build-images.sh, as tests and benchmarks find them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from coordinator.engine.container_runtime import ContainerRuntimeUnavailable


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

    def pinned_ref(self) -> str:
        """``repository@sha256:...``: the reference that names exactly this image."""
        return f"{self.ref.rsplit(':', 1)[0]}@{self.digest}"
