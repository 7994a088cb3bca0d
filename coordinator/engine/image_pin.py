"""The engine image that the embedded engine equals: pinning without a container runtime.

The embedded engine runs this checkout's ``engine_spark`` on the installed libraries. It is
the engine image's engine when both come from the same build inputs: the image's sources (the
engine and core packages, the Containerfile, the lock files; ``ENGINE_IMAGE_INPUTS``, as
scripts/build-images.sh hashes them) and the locked library versions. scripts/build-images.sh
records the engine image it builds in ``images/engine-spark/.built/`` (``sources``, ``image``,
``digest``: this machine's build) and, for a release (``RECORD_RELEASE=1``), in
``images/engine-spark/digests.txt``, one line ``<sources digest> <repository>@sha256:<digest>
<image id>``; that file is committed with the release, so another checkout of the same commit
finds the image reference without Podman, and can pull (from a registry the image was pushed
to) or rebuild it (reproducibly: same commit, base image and mirror state give the same
digest).

Pure functions over file contents, plus ``recorded_image`` which reads the checkout.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from coordinator.engine.installed import installed_version

IMAGE_DIR = Path("images") / "engine-spark"
RECORDS = IMAGE_DIR / "digests.txt"
LOCAL_BUILD = IMAGE_DIR / ".built"
ENGINE_IMAGE_INPUTS = (
    "images/engine-spark/Containerfile",
    "images/engine-spark/jks_epoch.py",
    "images/engine-spark/build-requirements.lock",
    "images/engine-spark/requirements.lock",
    ".dockerignore",
    "pyproject.toml",
    "README.md",
    "common",
    "engine_spark",
)
"""What the engine image is built from; keep in step with scripts/build-images.sh."""
LOCK = IMAGE_DIR / "requirements.lock"
_LOCK_LINE = re.compile(r"^([A-Za-z0-9._-]+)==(\S+)\s")


def _files(root: Path, inputs: Iterable[str]) -> list[str]:
    found: list[str] = []
    for name in inputs:
        path = root / name
        candidates = sorted(path.rglob("*")) if path.is_dir() else [path]
        for p in candidates:
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc":
                found.append(p.relative_to(root).as_posix())
    return sorted(found, key=lambda s: s.encode())


def sources_digest(root: Path, inputs: Iterable[str] = ENGINE_IMAGE_INPUTS) -> str:
    """SHA-256 of the ``sha256sum`` listing of the input files, sorted by path (bytes order).

    Equal to ``find INPUTS -type f ... -print0 | LC_ALL=C sort -z | xargs -0 sha256sum |
    sha256sum`` in scripts/build-images.sh.
    """
    listing = hashlib.sha256()
    for rel in _files(root, inputs):
        listing.update(f"{hashlib.sha256((root / rel).read_bytes()).hexdigest()}  {rel}\n".encode())
    return listing.hexdigest()


def parse_records(text: str) -> dict[str, str]:
    """``digests.txt`` -> {sources digest: pinned image reference}; the last line wins."""
    records: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) < 2 or "@sha256:" not in fields[1] or len(fields[0]) != 64:
            raise ValueError(f"{RECORDS}:{number}: expected '<sources sha256> <repo>@sha256:...'")
        records[fields[0]] = fields[1]
    return records


def local_record(built: Path) -> dict[str, str]:
    """The image scripts/build-images.sh built on this machine: {sources digest: reference}."""
    try:
        sources, image, digest = (
            (built / name).read_text().strip() for name in ("sources", "image", "digest")
        )
    except OSError:
        return {}
    repository = image.rsplit(":", 1)[0] if "/" not in image.rsplit(":", 1)[-1] else image
    return {sources: f"{repository}@{digest}"} if digest.startswith("sha256:") else {}


def lock_versions(text: str) -> dict[str, str]:
    """``requirements.lock`` -> {normalized name: version}."""
    found = {}
    for line in text.splitlines():
        m = _LOCK_LINE.match(line)
        if m:
            found[_normalized(m.group(1))] = m.group(2)
    return found


def lock_mismatches(locked: Mapping[str, str], installed: Mapping[str, str | None]) -> list[str]:
    """``name locked X, installed Y`` for every locked distribution installed differently."""
    return [
        f"{name} locked {version}, installed {installed.get(name) or 'none'}"
        for name, version in sorted(locked.items())
        if installed.get(name) != version
    ]


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _installed(name: str) -> str | None:
    return installed_version(name)


def recorded_image(root: Path) -> str | None:
    """The image reference recorded for this checkout's engine sources, when the installed
    libraries are the locked ones; ``None`` otherwise (an installed package, not a checkout;
    no image built from these sources; other library versions)."""
    records_path, lock_path = root / RECORDS, root / LOCK
    if not lock_path.is_file():
        return None
    records = parse_records(records_path.read_text()) if records_path.is_file() else {}
    records |= local_record(root / LOCAL_BUILD)
    if not records:
        return None
    ref = records.get(sources_digest(root))
    if ref is None:
        return None
    locked = lock_versions(lock_path.read_text())
    if lock_mismatches(locked, {name: _installed(name) for name in locked}):
        return None
    return ref
