"""``${{ env.NAME }}`` in URLs and headers, replaced by environment variables.

As in the reference, any other ``${{ ... }}`` expression is an error, and so is an unset
variable. Unlike the reference, names may contain digits (``API_KEY2``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from coordinator.ingest.errors import ParameterError

_EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}")
_ENV = re.compile(r"^\s*env\.([A-Za-z_][A-Za-z0-9_-]*)\s*$")


def render(template: str, *, field: str, env: Mapping[str, str] | None = None) -> str:
    """``template`` with every ``${{ env.NAME }}`` replaced; ``field`` names it in errors."""
    variables = os.environ if env is None else env

    def substitute(m: re.Match[str]) -> str:
        expr = _ENV.match(m.group(1))
        if expr is None:
            raise ParameterError(
                f"unsupported template expression {m.group(0)!r} (only ${{{{ env.NAME }}}})",
                path=field,
            )
        name = expr.group(1)
        if name not in variables:
            raise ParameterError(f"environment variable {name} is not set", path=field)
        return variables[name]

    return _EXPRESSION.sub(substitute, template)
