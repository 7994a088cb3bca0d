"""Markdown of dataset descriptions and attachments, rendered safely: CommonMark (tables too)
by ``markdown-it-py`` with raw HTML off (it is shown as text), images off (nothing is loaded
from anywhere), and link targets limited to http(s) and mailto URLs and relative paths."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from coordinator.ui.html import Html

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

_SAFE_SCHEMES = ("http:", "https:", "mailto:")


def _safe_link(url: str) -> bool:
    lowered = url.strip().lower()
    if ":" not in lowered.split("/", 1)[0]:
        return True  # relative: no scheme
    return lowered.startswith(_SAFE_SCHEMES)


@cache
def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
    md.disable("image")
    md.validateLink = _safe_link  # type: ignore[method-assign]
    return md


def render_markdown(text: str) -> Html:
    """``text`` as HTML: safe to insert as it is."""
    return Html(_parser().render(text))
