"""The lineage graph as an SVG drawn on the server: datasets in columns by depth (inputs to the
left), each node a link to its dataset page, edges as curves; no script, no inline style (the
page's CSS styles it by class), every name escaped."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from urllib.parse import quote

from coordinator.ui.html import Html, join, render

NODE_W, NODE_H = 180, 36
GAP_X, GAP_Y = 70, 18
MAX_LABEL = 22


def layered(names: Sequence[str], upstream: Callable[[str], list[str]]) -> dict[str, int]:
    """Each name's column: one more than its deepest input's (a cycle is cut)."""
    depth: dict[str, int] = {}
    visiting: set[str] = set()

    def of(name: str) -> int:
        if name in depth:
            return depth[name]
        if name in visiting:
            return 0
        visiting.add(name)
        ups = [u for u in upstream(name) if u in known]
        depth[name] = 1 + max((of(u) for u in ups), default=-1)
        visiting.discard(name)
        return depth[name]

    known = set(names)
    for name in names:
        of(name)
    return depth


def lineage_svg(
    nodes: Sequence[tuple[str, str]],
    edges: Sequence[tuple[str, str]],
    *,
    current: str | None = None,
    link: Callable[[str], str | None],
) -> Html:
    """``nodes`` (name, kind) and ``edges`` (input, dependent) as an SVG; ``link`` gives a
    node's URL (``None``: not a link, e.g. an input outside the workspace)."""
    names = [n for n, _ in nodes]
    kinds = dict(nodes)
    ups: dict[str, list[str]] = {n: [] for n in names}
    for source, target in edges:
        ups.setdefault(target, []).append(source)
    depth = layered(names, lambda n: ups.get(n, []))
    columns: dict[int, list[str]] = {}
    for name in names:
        columns.setdefault(depth[name], []).append(name)
    where: dict[str, tuple[int, int]] = {}
    for col, members in columns.items():
        for row, name in enumerate(sorted(members)):
            where[name] = (10 + col * (NODE_W + GAP_X), 10 + row * (NODE_H + GAP_Y))
    width = 20 + (max(columns, default=0) + 1) * (NODE_W + GAP_X) - GAP_X
    height = 20 + max((len(m) for m in columns.values()), default=1) * (NODE_H + GAP_Y) - GAP_Y
    paths = []
    for source, target in edges:
        if source not in where or target not in where:
            continue
        (x1, y1), (x2, y2) = where[source], where[target]
        x1, y1, y2 = x1 + NODE_W, y1 + NODE_H // 2, y2 + NODE_H // 2
        mid = (x1 + x2) // 2
        paths.append(
            render(
                '<path class="edge" d="M$x1 $y1 C$mid $y1, $mid $y2, $x2 $y2"'
                ' marker-end="url(#arrow)"/>',
                x1=x1,
                y1=y1,
                mid=mid,
                x2=x2,
                y2=y2,
            )
        )
    boxes = []
    for name in names:
        x, y = where[name]
        label = name if len(name) <= MAX_LABEL else name[: MAX_LABEL - 1] + "\u2026"
        kind = kinds.get(name, "")
        css = f"node kind-{kind.lower()}" + (" current" if name == current else "")
        box = render(
            '<g class="$css" data-name="$name"><title>$name ($kind)</title>'
            '<rect x="$x" y="$y" rx="6" width="$w" height="$h"/>'
            '<text x="$tx" y="$ty">$label</text></g>',
            css=css,
            name=name,
            kind=kind,
            x=x,
            y=y,
            w=NODE_W,
            h=NODE_H,
            tx=x + 10,
            ty=y + NODE_H // 2 + 5,
            label=label,
        )
        url = link(name)
        boxes.append(render('<a href="$url">$box</a>', url=url, box=box) if url else box)
    return render(
        '<svg class="lineage" xmlns="http://www.w3.org/2000/svg" width="$w" height="$h"'
        ' viewBox="0 0 $w $h" role="img" aria-label="lineage">'
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8"'
        ' markerHeight="8" orient="auto-start-reverse"><path d="M0 0 L10 5 L0 10 z"/></marker>'
        "</defs>$paths$boxes</svg>",
        w=width,
        h=height,
        paths=join(paths),
        boxes=join(boxes),
    )


def dataset_url(name: str) -> str:
    return "/ui/datasets/" + quote(name, safe="")
