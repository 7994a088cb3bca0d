"""Messages of the Smart Transfer Protocol's pull flow (RFC-008; the spec's AsyncAPI file
``smart-transfer-protocol.asyncapi.yaml``), as JSON text, and the metadata batch (pure).

A batch of blocks is a tar archive (``application/tar+gzip``, base64 in the JSON) whose
members are named by the blocks' multihashes. Reading one is hostile-input code: regular
members only, canonical multihash names, each within the block size limit, a bounded count
and a bounded decompressed total.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import io
import json
import tarfile
from collections.abc import Sequence
from typing import Any

from common.odf.errors import DecodeError
from common.odf.multihash import Multihash
from common.serde.flatbuffers_codec import decode_block
from common.serde.json_depth import MAX_DEPTH, first_too_deep
from coordinator.sharing.errors import RejectedContentError
from coordinator.sharing.limits import Limits

SUBPROTOCOL = "odf/smart-transfer-protocol/v1"
"""The OpenAPI file's ``Sec-WebSocket-Protocol`` value. It is not an RFC 6455 token (``/``
is a separator), so conforming WebSocket libraries refuse it; the version travels in
``VERSION_HEADER`` instead, checked by the server when present."""
VERSION_HEADER = "X-Odf-Smtp-Version"
VERSION = "1"
TAR_GZIP = "application/tar+gzip"
BASE64 = "base64"


def encode(message: object) -> str:
    return json.dumps(message, separators=(",", ":"))


def decode(text: str | bytes, where: str) -> dict[str, Any]:
    """A message from the peer: a JSON object, its nesting scanned before it is parsed."""
    data = text.encode("utf-8", errors="replace") if isinstance(text, str) else text
    if first_too_deep(data, lines=False) is not None:
        raise RejectedContentError(
            f"{where}: not a JSON message: nested deeper than {MAX_DEPTH} arrays and objects"
        )
    try:
        message = json.loads(text)
    except ValueError as e:
        raise RejectedContentError(f"{where}: not a JSON message: {e}") from None
    if isinstance(message, str):  # the reference dialect's refusal where an object is success
        said = message.removeprefix("refused: ")[:1000]
        raise RejectedContentError(f"{where}: the server refused: {said}")
    if not isinstance(message, dict):
        raise RejectedContentError(f"{where}: not a JSON object")
    if "errorDetails" in message:
        details = message["errorDetails"]
        description = details.get("description") if isinstance(details, dict) else details
        raise SpecRefusalError(f"{where}: the server refused: {description}")
    return message


class SpecRefusalError(RejectedContentError):
    """A ``DatasetError`` (the spec's refusal) from the peer."""


def error(code: str, description: str) -> dict[str, Any]:
    return {"errorDetails": {"errorCode": code, "description": description}}


def blocks_batch(blocks: Sequence[tuple[Multihash, bytes]]) -> dict[str, Any]:
    """An ``ObjectsBatch`` of ``MetadataBlock`` objects (the spec's)."""
    return {
        "objectsCount": len(blocks),
        "objectType": "MetadataBlock",
        "mediaType": TAR_GZIP,
        "encoding": BASE64,
        "payload": base64.b64encode(tar_gz(blocks)).decode("ascii"),
    }


def tar_gz(blocks: Sequence[tuple[Multihash, bytes]]) -> bytes:
    """The blocks as a gzip'd tar archive, members named by their hashes (both dialects)."""
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as zipped:  # noqa: SIM117
        with tarfile.open(fileobj=zipped, mode="w") as tar:
            for h, data in blocks:
                info = tarfile.TarInfo(h.to_multibase())
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def read_blocks_batch(batch: object, where: str, limits: Limits) -> dict[Multihash, bytes]:
    """The blocks of a received ``ObjectsBatch`` (the spec's), by name (their hashes are
    checked later)."""
    if not isinstance(batch, dict):
        raise RejectedContentError(f"{where}: 'blocks' is not an ObjectsBatch")
    if batch.get("mediaType") != TAR_GZIP or batch.get("encoding") != BASE64:
        raise RejectedContentError(
            f"{where}: unsupported batch {batch.get('mediaType')!r}/{batch.get('encoding')!r}"
        )
    payload = batch.get("payload")
    if not isinstance(payload, str):
        raise RejectedContentError(f"{where}: the batch has no payload")
    try:
        raw = base64.b64decode(payload, validate=True)
    except binascii.Error as e:
        raise RejectedContentError(f"{where}: the batch is not base64 tar+gzip: {e}") from None
    return read_tar_gz(raw, batch.get("objectsCount"), where, limits)


def read_tar_gz(raw: bytes, count: object, where: str, limits: Limits) -> dict[Multihash, bytes]:
    """The blocks of a gzip'd tar archive said to hold ``count`` of them (both dialects)."""
    inflated = _Inflating(gzip.GzipFile(fileobj=io.BytesIO(raw)), limits.max_batch_bytes, where)
    blocks: dict[Multihash, bytes] = {}
    try:
        with tarfile.open(fileobj=inflated, mode="r|") as tar:  # streamed: nothing inflated ahead
            for member in tar:
                _check_member(member, where, limits)
                file = tar.extractfile(member)
                assert file is not None
                blocks[Multihash.from_multibase(member.name)] = file.read()
                if len(blocks) > limits.max_new_blocks:
                    raise RejectedContentError(
                        f"{where}: more than {limits.max_new_blocks} blocks in the batch"
                    )
        inflated.expect_end()
    except tarfile.TarError as e:
        raise RejectedContentError(f"{where}: the batch is not a tar archive: {e}") from None
    except (OSError, EOFError) as e:  # gzip's own errors, while streaming
        raise RejectedContentError(f"{where}: the batch is not tar+gzip: {e}") from None
    if count != len(blocks):
        raise RejectedContentError(f"{where}: the batch says {count} blocks, it has {len(blocks)}")
    return blocks


def batch_head(blocks: dict[Multihash, bytes], where: str) -> Multihash:
    """The block of a batch no other block of it links to (a batch holds one chain's blocks;
    their hashes and links are checked by the walk that reads them)."""
    parents = set()
    for data in blocks.values():
        try:
            prev = decode_block(data).prev_block_hash
        except (DecodeError, ValueError):
            continue
        if prev is not None:
            parents.add(prev)
    heads = [h for h in blocks if h not in parents]
    if len(heads) != 1:
        raise RejectedContentError(
            f"{where}: the metadata batch has {len(heads)} heads, expected one chain"
        )
    return heads[0]


class _Inflating(io.RawIOBase):
    """A gzip stream read through a counter: past ``limit`` inflated bytes, the batch is
    refused at once (a compression bomb never gets further than the limit)."""

    def __init__(self, stream: gzip.GzipFile, limit: int, where: str) -> None:
        self.stream, self.limit, self.where, self.total = stream, limit, where, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self.stream.readinto(buffer)
        self.total += n
        if self.total > self.limit:
            raise RejectedContentError(
                f"{self.where}: the metadata batch inflates past {self.limit} bytes (refused"
                " while unpacking it)"
            )
        return n

    def expect_end(self) -> None:
        """After the archive: at most a tar record's padding, no more (a stream of zeros
        after the end-of-archive marker is a bomb too)."""
        rest = self.stream.read(_PADDING + 1)
        if len(rest) > _PADDING or rest.strip(b"\0"):
            raise RejectedContentError(f"{self.where}: the batch has data after its tar archive")


_PADDING = tarfile.RECORDSIZE


def _check_member(member: tarfile.TarInfo, where: str, limits: Limits) -> None:
    if not member.isreg():
        raise RejectedContentError(f"{where}: batch member {member.name!r} is not a file")
    try:
        canonical = Multihash.from_multibase(member.name).to_multibase() == member.name
    except (DecodeError, ValueError):
        canonical = False
    if not canonical:
        raise RejectedContentError(f"{where}: batch member {member.name!r} is not a block name")
    if member.size > limits.max_block_bytes:
        raise RejectedContentError(
            f"{where}: block {member.name} is larger than {limits.max_block_bytes} bytes"
        )
