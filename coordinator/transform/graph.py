"""The dependency order of datasets: inputs before the derivative datasets that read them."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

from common.odf.errors import ValidationError
from common.odf.identity import DatasetID
from coordinator.dataset import Dataset, DatasetNotFoundError
from coordinator.transform.errors import TransformSetupError

Resolver = Callable[[DatasetID], Dataset]
T = TypeVar("T")


def inputs_first(
    items: Iterable[T],
    *,
    key: Callable[[T], Hashable],
    upstream: Callable[[T], Iterable[T]],
    name: Callable[[T], str] | None = None,
) -> list[T]:
    """``items``, each after what ``upstream`` gives for it (depth first, each item once).

    With ``name``, a cycle is a ``ValidationError`` that names it; without, a cycle is cut
    where it closes (verification reports damaged chains instead of refusing them).
    """
    ordered: list[T] = []
    done: set[Hashable] = set()

    def visit(item: T, trail: tuple[T, ...]) -> None:
        k = key(item)
        if k in done:
            return
        if any(key(t) == k for t in trail):
            if name is None:
                return
            raise ValidationError(
                f"inputs form a cycle: {' -> '.join(name(t) for t in (*trail, item))}"
            )
        for before in upstream(item):
            visit(before, (*trail, item))
        done.add(k)
        ordered.append(item)

    for item in items:
        visit(item, ())
    return ordered


def input_ids(ds: Dataset) -> list[DatasetID]:
    """The ids of a dataset's inputs (none for a root dataset)."""
    transform = ds.state().transform
    if transform is None:
        return []
    return [DatasetID.from_did(i.dataset_ref) for i in transform.inputs]


def input_refs(ds: Dataset) -> list[tuple[str, str]]:
    """A dataset's inputs as (did:odf, the alias its query reads it by)."""
    transform = ds.state().transform
    if transform is None:
        return []
    return [
        (DatasetID.from_did(i.dataset_ref).to_did(), i.alias or i.dataset_ref)
        for i in transform.inputs
    ]


def dependency_order(
    datasets: Iterable[Dataset], resolve: Resolver, *, recursive: bool
) -> list[Dataset]:
    """``datasets`` with inputs first; with ``recursive``, also every upstream dataset."""
    datasets = list(datasets)
    wanted = {ds.id for ds in datasets}

    def upstream(ds: Dataset) -> Iterable[Dataset]:
        for input_id in input_ids(ds):
            try:
                found = resolve(input_id)
            except DatasetNotFoundError:
                raise TransformSetupError(
                    f"dataset {ds.alias!r}: input {input_id} is not in the workspace"
                ) from None
            if recursive or found.id in wanted:
                yield found

    return inputs_first(datasets, key=lambda ds: ds.id, upstream=upstream, name=lambda ds: ds.alias)
