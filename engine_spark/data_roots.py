"""Path confinement: the engine reads and writes only under the data roots it was started with.

A request names files (inputs, schema files, checkpoints, outputs) by absolute path, and a
request may come from anyone who can reach the engine. Every path a request names is resolved
(``realpath``: symlinks, ``..`` and relative parts) and must lie under one of the roots, which
are resolved the same way at start-up; anything else refuses the whole request before Spark
sees it, so nothing is read or created outside the roots. With no roots every request that
names a file is refused.

The check is pure (no Spark): ``request_paths`` lists the (field, path) pairs of each request
message, ``DataRoots.check_request`` checks them all.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from common.odf import engine_protocol as ep
from common.odf.errors import OdfError

IMAGE_DATA_ROOTS = ("/opt/engine/in", "/opt/engine/out")
"""Where the engine image's coordinators (the reference one included) mount a request's files."""


class PathOutsideRootsError(OdfError):
    """A request names a path outside the engine's data roots."""


@dataclass(frozen=True, slots=True)
class DataRoots:
    """The resolved directories a request's paths must lie under."""

    roots: tuple[str, ...]

    @classmethod
    def of(cls, paths: Iterable[str]) -> DataRoots:
        """Resolve ``paths`` (relative ones against the current directory), deduplicated."""
        return cls(tuple(dict.fromkeys(os.path.realpath(p) for p in paths if p)))

    def check(self, field: str, path: str) -> None:
        """Raise ``PathOutsideRootsError`` unless ``path`` resolves to a place under a root."""
        if not os.path.isabs(path):
            raise PathOutsideRootsError(
                f"request refused: {field} {path!r} is not an absolute path"
            )
        resolved = os.path.realpath(path)
        if any(_under(resolved, root) for root in self.roots):
            return
        where = ", ".join(self.roots) if self.roots else "none (start it with --data-root)"
        shown = path if resolved == path else f"{path} (resolves to {resolved})"
        raise PathOutsideRootsError(
            f"request refused: {field} {shown} is outside the engine's data roots: {where}"
        )

    def check_request(self, request: object) -> None:
        """Check every path ``request`` names (any request message of the engine protocol)."""
        for field, path in request_paths(request):
            self.check(field, path)


NO_DATA_ROOTS = DataRoots(())
"""No roots: every request that names a file is refused."""


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def request_paths(request: object) -> Iterator[tuple[str, str]]:
    """The (field, path) pairs a request message names; fields as ``name[i].field``."""
    match request:
        case ep.TransformRequest() | ep.MigrateQueryRequest():
            yield from _input_paths(request.query_inputs)
            if request.prev_checkpoint_path is not None:
                yield "prev_checkpoint_path", request.prev_checkpoint_path
            yield "new_checkpoint_path", request.new_checkpoint_path
            yield "new_data_path", request.new_data_path
        case ep.RawQueryRequest():
            for i, path in enumerate(request.input_data_paths):
                yield f"input_data_paths[{i}]", path
            yield "output_data_path", request.output_data_path
        case ep.QueryRequest():
            for i, query_input in enumerate(request.inputs):
                for j, path in enumerate(query_input.data_paths):
                    yield f"inputs[{i}].data_paths[{j}]", path
            yield "output_data_path", request.output_data_path
        case ep.SplitTransformRequest():
            for field, path in _input_paths(request.request.query_inputs):
                yield f"request.{field}", path
            if request.request.prev_checkpoint_path is not None:
                yield "request.prev_checkpoint_path", request.request.prev_checkpoint_path
            yield "slices_dir", request.slices_dir
        case ep.HashDataFilesRequest():
            for i, path in enumerate(request.data_paths):
                yield f"data_paths[{i}]", path
        case ep.ValidateQueryRequest():
            return
        case _:
            raise TypeError(f"not an engine request: {type(request).__name__}")


def _input_paths(inputs: Iterable[ep.TransformRequestInput]) -> Iterator[tuple[str, str]]:
    for i, query_input in enumerate(inputs):
        for j, path in enumerate(query_input.data_paths):
            yield f"query_inputs[{i}].data_paths[{j}]", path
        if query_input.schema_file:
            yield f"query_inputs[{i}].schema_file", query_input.schema_file
