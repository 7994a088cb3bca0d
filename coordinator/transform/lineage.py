"""The dataset graph of a workspace (``odf inspect lineage``): datasets and input edges.

Pure once built: ``Lineage.of`` reads each dataset's kind and inputs; ``around(name)`` keeps
what lies upstream and downstream of one dataset.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from common.odf.errors import OdfError
from coordinator.dataset import Dataset
from coordinator.dataset.provenance import provenance
from coordinator.transform.graph import input_refs

EXTERNAL = "external"


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    kind: str
    """``Root``, ``Derivative``, ``unknown`` for a dataset that cannot be read, ``external``
    for an input that is not in the workspace (named by its alias in the query)."""
    clone_of: str | None = None
    """The remote a clone is pulled from."""
    dataset_id: str | None = None
    """The did:odf of an external input."""


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
        nodes: list[Node] = []
        edges: list[Edge] = []
        external: dict[str, Node] = {}
        for ds in datasets:
            clone_of = provenance(ds.layout).clone_of
            try:
                kind = ds.state().kind
                inputs = input_refs(ds)
            except (OdfError, OSError):
                nodes.append(Node(ds.alias, "unknown", clone_of))
                continue
            nodes.append(Node(ds.alias, kind.value if kind else "unknown", clone_of))
            for did, alias in inputs:
                source = names.get(did)
                if source is None:  # not here: named by the query's alias, unless taken
                    node = external.get(did)
                    if node is None:
                        taken = set(names.values()) | {n.name for n in external.values()}
                        node = Node(alias if alias not in taken else did, EXTERNAL, None, did)
                        external[did] = node
                    source = node.name
                edges.append(Edge(source, ds.alias))
        return cls(tuple(nodes) + tuple(external.values()), tuple(edges))

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
        return next((n.kind for n in self.nodes if n.name == name), EXTERNAL)

    def node(self, name: str) -> Node | None:
        return next((n for n in self.nodes if n.name == name), None)


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
