"""HTML built with escaping by default: ``render`` fills a ``string.Template`` whose every value
is escaped unless it is already ``Html`` (the output of ``render`` or ``join``, or a constant
marked with ``Html`` by the code itself). Data never reaches a page unescaped; the only way to
insert markup is to build it here."""

from __future__ import annotations

import html
from collections.abc import Iterable
from string import Template

_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F)}
"""C0 controls but tab, newline and carriage return, and DEL: shown as ``\\xNN`` text."""


class Html(str):
    """Markup that is safe as it is (never wrap text that came from elsewhere)."""

    __slots__ = ()


def visible(text: str) -> str:
    """``text`` with its control characters (but tab and line breaks) as ``\\xNN``."""
    return text.translate(_CONTROL)


def escape(value: object) -> Html:
    """``value`` as HTML text: ``Html`` as it is, anything else escaped (quotes too), with
    control characters made visible."""
    if isinstance(value, Html):
        return value
    text = "" if value is None else str(value)
    return Html(html.escape(visible(text), quote=True))


def render(template: str, **values: object) -> Html:
    """``template`` (``$name`` placeholders, a constant of the code) with ``values`` escaped."""
    return Html(Template(template).substitute({k: escape(v) for k, v in values.items()}))


def join(parts: Iterable[object], separator: str = "") -> Html:
    """``parts`` escaped (``Html`` kept) and joined."""
    return Html(escape(separator).join(escape(p) for p in parts))
