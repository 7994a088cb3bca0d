"""Which engines (``TransformSql.engine``) this coordinator can run.

A transform names the engine its SQL is written for. Running it on another engine and
recording the result under the name it gives would be wrong output, so a transform for an
engine we do not have is refused where it enters the workspace (``odf add``,
``odf set-transform``); the engine also refuses to run another engine's SQL.
"""

from __future__ import annotations

from common.odf.errors import ValidationError

ENGINE_NAMES = ("spark",)


def check_engine_name(name: str, *, path: str) -> None:
    """``ValidationError`` naming ``path`` unless an engine for ``name`` is configured."""
    if name.lower() not in ENGINE_NAMES:
        known = ", ".join(repr(n) for n in ENGINE_NAMES)
        raise ValidationError(
            f"no engine for {name!r}: this coordinator runs {known} transforms (SQL written for"
            f" {name!r} must run on an engine for {name!r}, or be rewritten for {known})",
            path=path,
        )
