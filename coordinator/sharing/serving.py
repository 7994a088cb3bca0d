"""The workspace's datasets served read-only over the Simple Transfer Protocol (RFC-007).

``GET /<NAME>/refs/head``, ``/<NAME>/blocks/<hash>``, ``/<NAME>/data/<hash>``,
``/<NAME>/checkpoints/<hash>``: ``odf serve`` answers these on its HTTP address, so any
simple client (``odf pull http://host:port/NAME``) pulls from a daemon. A request path is
parsed strictly (a dataset name, one of four keys, a canonical multihash); the file is found
through the workspace (never by joining request text to a path) and opened without following
a symbolic link. Anything else is "not found".
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass

from common.odf.dataset_refs import DatasetName
from common.odf.errors import DecodeError, OdfError, ValidationError
from common.odf.multihash import Multihash
from coordinator.workspace import Workspace

_KINDS = ("blocks", "data", "checkpoints")


@dataclass(frozen=True, slots=True)
class ObjectRequest:
    dataset: DatasetName
    kind: str
    """``refs``, ``blocks``, ``data`` or ``checkpoints``."""
    hash: Multihash | None = None
    """The object's name (``None`` for ``refs/head``)."""


def parse_request_path(path: str) -> ObjectRequest | None:
    """The object a request path names, or ``None`` when it names none (pure)."""
    parts = path.split("/")
    if len(parts) != 4 or parts[0] != "":
        return None
    _, name, kind, key = parts
    try:
        dataset = DatasetName.parse(name)
    except ValidationError:
        return None
    if kind == "refs":
        return ObjectRequest(dataset, kind) if key == "head" else None
    if kind not in _KINDS:
        return None
    try:
        h = Multihash.from_multibase(key)
    except (DecodeError, ValueError):
        return None
    if h.to_multibase() != key:  # one spelling per object
        return None
    return ObjectRequest(dataset, kind, h)


def open_object(ws: Workspace, request: ObjectRequest) -> tuple[int, int] | None:
    """An open file descriptor of the requested object and its size, or ``None``."""
    try:
        ds = ws.open_dataset(str(request.dataset))
    except OdfError:
        return None
    layout = ds.layout
    if request.hash is None:
        path = layout.head_ref_path
    elif request.kind == "blocks":
        path = layout.block_path(request.hash)
    elif request.kind == "data":
        path = layout.data_path(request.hash)
    else:
        path = layout.checkpoint_path(request.hash)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
            return None
        raise
    return fd, os.fstat(fd).st_size
