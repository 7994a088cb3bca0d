"""Print requirements from a pyproject.toml, one per line, for ``pip install -r`` in image builds.

    python requirements.py pyproject.toml build      # [build-system] requires
    python requirements.py pyproject.toml engine     # [project] dependencies + the `engine` extra

Lets the image install the project's dependencies in a layer of their own, before its sources.
"""

from __future__ import annotations

import sys
import tomllib
from typing import Any


def requirements(pyproject: dict[str, Any], what: str) -> list[str]:
    """``build``: the build-system requirements; otherwise the dependencies plus extra ``what``."""
    if what == "build":
        return list(pyproject["build-system"]["requires"])
    project = pyproject["project"]
    return list(project["dependencies"]) + list(project["optional-dependencies"][what])


if __name__ == "__main__":
    path, what = sys.argv[1:3]
    with open(path, "rb") as f:
        print("\n".join(requirements(tomllib.load(f), what)))
