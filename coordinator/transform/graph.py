"""The dependency order of datasets: inputs before the derivative datasets that read them."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from common.odf.errors import ValidationError
from common.odf.identity import DatasetID
from coordinator.dataset import Dataset, DatasetNotFoundError
from coordinator.transform.errors import TransformSetupError

Resolver = Callable[[DatasetID], Dataset]


def input_ids(ds: Dataset) -> list[DatasetID]:
    """The ids of a dataset's inputs (none for a root dataset)."""
    transform = ds.state().transform
    if transform is None:
        return []
    return [DatasetID.from_did(i.dataset_ref) for i in transform.inputs]


def dependency_order(
    datasets: Iterable[Dataset], resolve: Resolver, *, recursive: bool
) -> list[Dataset]:
    """``datasets`` with inputs first; with ``recursive``, also every upstream dataset."""
    ordered: list[Dataset] = []
    done: set[DatasetID] = set()
    wanted = {ds.id for ds in datasets}

    def visit(ds: Dataset, trail: tuple[str, ...]) -> None:
        if ds.id in done:
            return
        if ds.alias in trail:
            raise ValidationError(f"inputs form a cycle: {' -> '.join((*trail, ds.alias))}")
        for input_id in input_ids(ds):
            try:
                upstream = resolve(input_id)
            except DatasetNotFoundError:
                raise TransformSetupError(
                    f"dataset {ds.alias!r}: input {input_id} is not in the workspace"
                ) from None
            if recursive or upstream.id in wanted:
                visit(upstream, (*trail, ds.alias))
        done.add(ds.id)
        ordered.append(ds)

    for ds in datasets:
        visit(ds, ())
    return ordered
