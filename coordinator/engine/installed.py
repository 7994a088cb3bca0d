"""The installed version of a distribution, read without importing ``importlib.metadata``.

``importlib.metadata`` imports the ``email`` package to parse metadata: about a third of the
start of ``odf --version``, which reports four versions. The version of a distribution
installed as a ``*.dist-info`` directory (what pip, uv and editable installs write) is read
here from its ``METADATA`` file, searching ``sys.path`` in order as ``importlib.metadata``
does (the first entry holding the distribution wins). Anything else (``*.egg-info``, zipped
paths, a distribution not found) is left to ``importlib.metadata``, so the answer is its.
"""

from __future__ import annotations

import os
import re
import sys

_METADATA_DIRS = ("dist-info", "egg-info")
_MAX_HEADER_LINES = 200


def installed_version(distribution: str) -> str | None:
    """The version of ``distribution`` installed for this interpreter; ``None`` if none is."""
    wanted = _normalized(distribution)
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:  # a missing directory, a zip file: importlib.metadata decides
            continue
        for name in names:
            stem, _, suffix = name.lower().rpartition(".")
            if suffix not in _METADATA_DIRS or _normalized(stem.partition("-")[0]) != wanted:
                continue
            if suffix != "dist-info":
                return _from_importlib(distribution)  # an egg-info: not read here
            version = _metadata_version(os.path.join(entry or ".", name, "METADATA"))
            return version if version is not None else _from_importlib(distribution)
    return _from_importlib(distribution)


def _normalized(name: str) -> str:
    """PEP 503 normalization, with ``_`` as directory names spell it."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _metadata_version(path: str) -> str | None:
    """The ``Version:`` header of a core metadata file (``None`` if it has none)."""
    try:
        with open(path, encoding="utf-8") as f:
            for _, line in zip(range(_MAX_HEADER_LINES), f, strict=False):
                if not line.strip():
                    break  # the headers end at the first blank line
                key, colon, value = line.partition(":")
                if colon and key.strip().lower() == "version":
                    return value.strip()
    except (OSError, UnicodeError):
        return None
    return None


def _from_importlib(distribution: str) -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
