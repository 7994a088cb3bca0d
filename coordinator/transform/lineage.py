"""The dataset graph of a workspace (``odf inspect lineage``): datasets and input edges.

Pure once built: ``Lineage.of`` reads each dataset's kind and inputs; ``around(name)`` keeps
what lies upstream and downstream of one dataset.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from common.odf.errors import OdfError
from coordinator.dataset import Dataset
from coordinator.transform.graph import input_ids


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    kind: str
    """``Root``, ``Derivative``, or ``unknown`` for a dataset that cannot be read."""


@dataclass(frozen=True, slots=True)
class Edge:
    """``source`` is an input of ``target``."""

    source: str
    target: str


@dataclass(frozen=True, slots=True)
class Lineage:
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]

    @classmethod
    def of(cls, datasets: Iterable[Dataset]) -> Lineage:
        datasets = sorted(datasets, key=lambda d: d.alias)
        names = {}
        for ds in datasets:
            try:
                names[ds.id.to_did()] = ds.alias
            except (OdfError, OSError):
                continue
        nodes, edges = [], []
        for ds in datasets:
            try:
                kind = ds.state().kind
                inputs = input_ids(ds)
            except (OdfError, OSError):
                nodes.append(Node(ds.alias, "unknown"))
                continue
            nodes.append(Node(ds.alias, kind.value if kind else "unknown"))
            for i in inputs:
                edges.append(Edge(names.get(i.to_did(), i.to_did()), ds.alias))
        return cls(tuple(nodes), tuple(edges))

    def upstream(self, name: str) -> list[str]:
        return [e.source for e in self.edges if e.target == name]

    def downstream(self, name: str) -> list[str]:
        return [e.target for e in self.edges if e.source == name]

    def around(self, name: str) -> Lineage:
        """Only ``name`` and what lies upstream and downstream of it."""
        keep = {name} | closure(name, self.upstream) | closure(name, self.downstream)
        return Lineage(
            tuple(n for n in self.nodes if n.name in keep),
            tuple(e for e in self.edges if e.source in keep and e.target in keep),
        )

    def roots(self) -> list[str]:
        """Datasets with no inputs in the graph, by name."""
        targets = {e.target for e in self.edges}
        return [n.name for n in self.nodes if n.name not in targets]

    def kind(self, name: str) -> str:
        return next((n.kind for n in self.nodes if n.name == name), "external")


def closure(name: str, step: Callable[[str], list[str]]) -> set[str]:
    """Every name reached from ``name`` by repeating ``step`` (``name`` itself only through a
    cycle)."""
    found: set[str] = set()
    todo = list(step(name))
    while todo:
        n = todo.pop()
        if n not in found:
            found.add(n)
            todo.extend(step(n))
    return found
