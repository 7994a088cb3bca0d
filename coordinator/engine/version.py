"""The exact version of the embedded engine, for pinning transforms without containers.

The embedded engine is ``python -m engine_spark`` from this installation. When it is the
engine of an image built from the same sources and lock files (a checkout whose
``images/engine-spark/digests.txt`` records that image, see ``image_pin``), its version is
that image's reference, ``repository@sha256:...``: a version another machine can pull or
rebuild, and that a container provider runs as is. Otherwise its version is what the process
runs: the project's release, a digest of the engine package's source files (a changed line
changes the version) and the versions of the libraries that compute the data
(``build_version``); transforms pinned so before keep running and verifying.
Nothing is imported: reading files and package metadata is enough.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
from functools import cache
from pathlib import Path

from coordinator.engine.errors import EngineUnavailableError
from coordinator.engine.image_pin import recorded_image
from coordinator.engine.installed import installed_version

ENGINE_PACKAGE = "engine_spark"
ENGINE_NAME = "odf-engine-spark"
DISTRIBUTION = "odf-py"
LIBRARIES = ("pyspark", "pyarrow")
_DIGEST_HEX_CHARS = 16


def engine_package_dir() -> Path:
    """The directory of the ``engine_spark`` package this interpreter would run."""
    spec = importlib.util.find_spec(ENGINE_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EngineUnavailableError(
            f"the embedded engine is not installed: no {ENGINE_PACKAGE!r} package "
            "(install the project with its `engine` extra, or use provider: container)"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def source_digest(package_dir: Path) -> str:
    """SHA-256 over the package's ``*.py`` files (relative names and contents, sorted)."""
    h = hashlib.sha256()
    for path in sorted(package_dir.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        h.update(path.relative_to(package_dir).as_posix().encode())
        h.update(b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:_DIGEST_HEX_CHARS]


def _installed_version(distribution: str) -> str:
    return installed_version(distribution) or "unknown"


@cache
def embedded_engine_version() -> str:
    """The recorded image's reference when there is one, else ``build_version()``."""
    return image_version() or build_version()


IMAGE_ENV = "ODF_EMBEDDED_ENGINE_IMAGE"
"""Set by an image whose embedded engine is an engine image's (the coordinator image, built
on the engine image): that image's ``repository@sha256:...``."""
_PINNED_REF = re.compile(r"^[a-z0-9][a-z0-9._/:-]*@sha256:[0-9a-f]{64}$")


@cache
def image_version() -> str | None:
    """``repository@sha256:...`` of the image this embedded engine equals: the one its own
    image declares (``ODF_EMBEDDED_ENGINE_IMAGE``), else the one recorded for this checkout."""
    declared = os.environ.get(IMAGE_ENV, "")
    if declared:
        if not _PINNED_REF.match(declared):
            raise EngineUnavailableError(
                f"{IMAGE_ENV}={declared!r}: expected an image reference repository@sha256:<64 hex>"
            )
        return declared
    return recorded_image(engine_package_dir().parent)


def embedded_engine_versions() -> frozenset[str]:
    """Every version the embedded engine runs as: its image's (if any) and its build's."""
    return frozenset(v for v in (image_version(), build_version()) if v)


@cache
def build_version() -> str:
    """E.g. ``odf-engine-spark/0.1.0+src.0123456789abcdef pyspark/4.0.0 pyarrow/26.0.1``."""
    digest = source_digest(engine_package_dir())
    if _installed_version("pyspark") == "unknown":
        raise EngineUnavailableError(
            "the embedded engine needs pyspark, which is not installed "
            "(install the project with its `engine` extra, or use provider: container)"
        )
    parts = [f"{ENGINE_NAME}/{_installed_version(DISTRIBUTION)}+src.{digest}"]
    parts += [f"{lib}/{_installed_version(lib)}" for lib in LIBRARIES]
    return " ".join(parts)
