"""A package's names imported when first used (PEP 562 ``__getattr__``).

A package whose ``__init__`` re-exports names from heavy submodules lists where each name
lives and lets ``lazy_exports`` import that submodule on first access, so that importing the
package (or a light submodule of it) costs nothing more (CLI start time).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, where: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: ``where[name]`` is the submodule defining ``name``;
    the value is cached in ``namespace`` (the package's globals) after the first import."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    return __getattr__
