"""Messages of the Smart Transfer Protocol's push flow (RFC-008; the AsyncAPI file's
``dataset/push/*`` channels), read as hostile input (pure).

``DatasetPushRequest``: ``datasetId`` (a ``did:odf``), ``currentHead`` (the server's head the
client expects; ``null`` for a dataset the server does not have yet), ``sizeEstimation``
(``TransferSizeEstimation``) and, as in the reference's implementation,
``forceUpdateIfDiverged`` (optional, default false). ``DatasetPushObjectsTransferRequest``:
``objectFiles``, a list of ``ObjectFileReference`` (``DataSlice`` or ``Checkpoint``, a
canonical multihash). Anything else, of any other type or spelling, is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from common.odf.errors import DecodeError, ValidationError
from common.odf.identity import DatasetID
from common.odf.multihash import Multihash
from coordinator.sharing.errors import RejectedContentError
from coordinator.sharing.limits import Limits
from coordinator.sharing.objects import ObjectKind

TOKEN_HINT = (
    "give the daemon's token (its .odf/run/token) with --token-file FILE or ODF_TOKEN, or keep"
    " it with its repository (odf repo add NAME URL --token-file FILE)"
)
OBJECT_TYPES = {"DataSlice": ObjectKind.DATA, "Checkpoint": ObjectKind.CHECKPOINT}
TYPE_OF = {kind: name for name, kind in OBJECT_TYPES.items()}
_SIZE_FIELDS = ("numBlocks", "numObjects", "bytesInRawBlocks", "bytesInRawObjects")


@dataclass(frozen=True, slots=True)
class SizeEstimation:
    num_blocks: int
    num_objects: int
    bytes_in_raw_blocks: int
    bytes_in_raw_objects: int
    num_records: int = 0
    """The reference's ``num_records`` (not in the spec's)."""

    def to_json(self) -> dict[str, int]:
        values = (
            self.num_blocks,
            self.num_objects,
            self.bytes_in_raw_blocks,
            self.bytes_in_raw_objects,
        )
        return dict(zip(_SIZE_FIELDS, values, strict=True))


@dataclass(frozen=True, slots=True)
class PushRequest:
    dataset_id: DatasetID | None
    """The spec's ``datasetId`` (the reference sends none: the pushed Seed says it)."""
    current_head: Multihash | None
    size: SizeEstimation
    force: bool = False
    public: bool = False
    """The reference's ``visibility_for_created_dataset`` (``Public``)."""

    def to_json(self) -> dict[str, Any]:
        assert self.dataset_id is not None
        return {
            "datasetId": self.dataset_id.to_did(),
            "currentHead": None if self.current_head is None else str(self.current_head),
            "sizeEstimation": self.size.to_json(),
            "forceUpdateIfDiverged": self.force,
        }


def parse_push_request(message: dict[str, Any], where: str, limits: Limits) -> PushRequest:
    did = message.get("datasetId")
    if not isinstance(did, str):
        raise RejectedContentError(f"{where}: DatasetPushRequest has no datasetId")
    try:
        dataset_id = DatasetID.from_did(did)
    except (DecodeError, ValidationError, ValueError):
        raise RejectedContentError(f"{where}: datasetId {did[:100]!r} is not a did:odf") from None
    current = message.get("currentHead")
    force = message.get("forceUpdateIfDiverged", False)
    if not isinstance(force, bool):
        raise RejectedContentError(f"{where}: forceUpdateIfDiverged is not a boolean")
    size = _size(message.get("sizeEstimation"), where, limits)
    head = None if current is None else parse_hash(current, "currentHead", where)
    return PushRequest(dataset_id, head, size, force)


def _size(value: object, where: str, limits: Limits) -> SizeEstimation:
    return read_size(value, where, limits, "sizeEstimation", _SIZE_FIELDS)


def read_size(
    value: object, where: str, limits: Limits, field: str, names: tuple[str, ...]
) -> SizeEstimation:
    """A pushed size estimation whose counts are named ``names`` (in ``SizeEstimation``'s
    order), at least one block and within the limit."""
    size = read_counts(value, where, field, names)
    if size.num_blocks < 1:
        raise RejectedContentError(f"{where}: {field}.{names[0]} must be at least 1")
    if size.num_blocks > limits.max_new_blocks:
        raise RejectedContentError(
            f"{where}: {size.num_blocks} blocks announced, over the limit of"
            f" {limits.max_new_blocks} in one transfer"
        )
    return size


def read_counts(value: object, where: str, field: str, names: tuple[str, ...]) -> SizeEstimation:
    """A size estimation whose counts are named ``names`` (in ``SizeEstimation``'s order)."""
    if not isinstance(value, dict):
        raise RejectedContentError(f"{where}: {field} is not a TransferSizeEstimation")
    numbers = []
    for name in names:
        n = value.get(name)
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise RejectedContentError(f"{where}: {field}.{name} is not a count")
        numbers.append(n)
    return SizeEstimation(*numbers)


def parse_object_files(
    message: dict[str, Any], where: str, limit: int
) -> list[tuple[ObjectKind, Multihash]]:
    """The objects of a ``DatasetPushObjectsTransferRequest`` (at most ``limit``)."""
    found = read_object_files(message.get("objectFiles"), where, limit, _SPEC_FILE_FIELDS)
    return [(kind, h) for kind, h, _ in found]


_SPEC_FILE_FIELDS = ("objectFiles", "objectType", "physicalHash", None)


def read_object_files(
    files: object, where: str, limit: int, fields: tuple[str, str, str, str | None]
) -> list[tuple[ObjectKind, Multihash, int | None]]:
    """A list of object references (at most ``limit``) whose list, type, hash and size (if
    any) are named by ``fields``."""
    list_name, type_name, hash_name, size_name = fields
    if not isinstance(files, list):
        raise RejectedContentError(f"{where}: {list_name} is not a list")
    if len(files) > limit:
        raise RejectedContentError(
            f"{where}: {len(files)} object files asked for, the pushed blocks name {limit}"
        )
    found = []
    for f in files:
        if not isinstance(f, dict):
            raise RejectedContentError(f"{where}: an object file is not an ObjectFileReference")
        kind = OBJECT_TYPES.get(f.get(type_name))  # type: ignore[arg-type]
        if kind is None:
            raise RejectedContentError(
                f"{where}: {type_name} {str(f.get(type_name))[:50]!r} cannot be uploaded"
                " or downloaded"
            )
        size = None
        if size_name is not None:
            size = f.get(size_name)
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise RejectedContentError(f"{where}: {size_name} is not a size")
        found.append((kind, parse_hash(f.get(hash_name), hash_name, where), size))
    return found


def object_file(kind: ObjectKind, physical_hash: Multihash) -> dict[str, str]:
    return {"objectType": TYPE_OF[kind], "physicalHash": str(physical_hash)}


def parse_hash(value: object, field: str, where: str) -> Multihash:
    """A multihash in its one canonical spelling."""
    if not isinstance(value, str):
        raise RejectedContentError(f"{where}: {field} is not a multihash")
    try:
        h = Multihash.from_multibase(value)
    except (DecodeError, ValueError):
        h = None
    if h is None or h.to_multibase() != value:
        raise RejectedContentError(f"{where}: {field} {value[:100]!r} is not a multihash")
    return h
