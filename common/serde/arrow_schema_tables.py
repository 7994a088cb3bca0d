"""Bounds-checked reading of an Arrow ``Schema`` flatbuffer, without pyarrow.

``Reader`` and ``Table`` give checked access to one buffer (every position against its size;
garbage raises ``DecodeError`` naming the field path); ``schema_root`` finds the Schema's
field tables; ``field_names`` reads just the top-level column names (what ``odf log`` shows
of a ``SetDataSchema``) without importing pyarrow. ``arrow_schema_reader`` builds the whole
``pyarrow.Schema`` on the same reader.
"""

from __future__ import annotations

import struct

from common.odf.errors import DecodeError

_IPC_CONTINUATION = b"\xff\xff\xff\xff"

SCALARS = {
    "bool": struct.Struct("<?"),
    "u8": struct.Struct("<B"),
    "i16": struct.Struct("<h"),
    "u16": struct.Struct("<H"),
    "i32": struct.Struct("<i"),
    "u32": struct.Struct("<I"),
    "i64": struct.Struct("<q"),
}


def fail(what: str, path: str) -> DecodeError:
    return DecodeError(f"invalid Arrow schema flatbuffer: {what}", path=path or None)


class Reader:
    """Bounds-checked access to one buffer, with a budget against shared/overlapping tables."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.size = len(data)
        # A well-formed buffer holds every Field table once, and a Field takes >= 12 bytes.
        self.fields_left = self.size // 12 + 1

    def scalar(self, kind: str, pos: int, path: str) -> int:
        fmt = SCALARS[kind]
        if pos < 0 or pos + fmt.size > self.size:
            raise fail(f"{kind} at byte {pos} lies outside the {self.size}-byte buffer", path)
        return int(fmt.unpack_from(self.data, pos)[0])

    def uoffset(self, pos: int, path: str) -> int:
        """The position an unsigned offset stored at ``pos`` points to."""
        off = self.scalar("u32", pos, path)
        target = pos + off
        if off == 0 or target >= self.size:
            raise fail(
                f"offset at byte {pos} points to byte {target}, outside the "
                f"{self.size}-byte buffer",
                path,
            )
        return target

    def table(self, pos: int, path: str) -> Table:
        return Table(self, pos, path)

    def string(self, pos: int, path: str) -> str:
        length = self.scalar("u32", pos, path)
        start = pos + 4
        if start + length >= self.size or self.data[start + length] != 0:
            raise fail(f"a {length}-byte string at byte {pos} has no terminator", path)
        try:
            return self.data[start : start + length].decode()
        except UnicodeDecodeError:
            raise fail(f"string at byte {pos} is not valid UTF-8", path) from None

    def vector(self, pos: int, elem_size: int, path: str) -> list[int]:
        """Positions of the elements of the vector at ``pos``."""
        count = self.scalar("u32", pos, path)
        start = pos + 4
        if start + count * elem_size > self.size:
            raise fail(f"a {count}-element vector at byte {pos} runs past the buffer end", path)
        return [start + i * elem_size for i in range(count)]

    def metadata(self, table: Table, slot: int, path: str) -> dict[bytes, bytes] | None:
        """Custom metadata; entries without a key or a value are skipped, like arrow-rs."""
        entries = table.tables(slot, path)
        if not entries:
            return None
        out: dict[bytes, bytes] = {}
        for i, kv in enumerate(entries):
            key = kv.string(0, f"{path}[{i}].key")
            value = kv.string(1, f"{path}[{i}].value")
            if key is not None and value is not None:
                out[key.encode()] = value.encode()
        return out or None


class Table:
    """A table located in the buffer: its vtable and inline size are checked on creation."""

    def __init__(self, reader: Reader, pos: int, path: str) -> None:
        self.r = reader
        self.pos = pos
        self.path = path
        vt = pos - reader.scalar("i32", pos, path)
        self.vt = vt
        self.vt_len = reader.scalar("u16", vt, path)
        self.obj_size = reader.scalar("u16", vt + 2, path)
        if self.vt_len < 4 or self.vt_len % 2 or vt + self.vt_len > reader.size:
            raise fail(f"vtable at byte {vt} has an invalid length {self.vt_len}", path)
        if self.obj_size < 4 or pos + self.obj_size > reader.size:
            raise fail(f"table at byte {pos} has an invalid size {self.obj_size}", path)

    def _slot(self, slot: int, size: int) -> int | None:
        voffset = 4 + 2 * slot
        if voffset + 2 > self.vt_len:
            return None
        off = self.r.scalar("u16", self.vt + voffset, self.path)
        if off == 0:
            return None
        if off < 4 or off + size > self.obj_size:
            raise fail(f"slot {slot} lies outside its {self.obj_size}-byte table", self.path)
        return self.pos + off

    def scalar(self, slot: int, kind: str, default: int) -> int:
        pos = self._slot(slot, SCALARS[kind].size)
        return default if pos is None else self.r.scalar(kind, pos, self.path)

    def _ref(self, slot: int, path: str) -> int | None:
        pos = self._slot(slot, 4)
        return None if pos is None else self.r.uoffset(pos, path)

    def string(self, slot: int, path: str) -> str | None:
        target = self._ref(slot, path)
        return None if target is None else self.r.string(target, path)

    def table(self, slot: int, path: str) -> Table | None:
        target = self._ref(slot, path)
        return None if target is None else Table(self.r, target, path)

    def tables(self, slot: int, path: str) -> list[Table] | None:
        target = self._ref(slot, path)
        if target is None:
            return None
        elements = self.r.vector(target, 4, path)
        return [
            Table(self.r, self.r.uoffset(at, f"{path}[{i}]"), f"{path}[{i}]")
            for i, at in enumerate(elements)
        ]

    def ints(self, slot: int, path: str) -> list[int] | None:
        target = self._ref(slot, path)
        if target is None:
            return None
        return [self.r.scalar("i32", at, path) for at in self.r.vector(target, 4, path)]


def schema_root(data: bytes) -> tuple[Reader, Table, list[Table]]:
    """The reader of ``data``, its root Schema table and the Schema's field tables."""
    if data[:4] == _IPC_CONTINUATION:
        raise DecodeError(
            "invalid Arrow schema flatbuffer: it starts with the IPC continuation marker "
            "0xFFFFFFFF (an IPC stream message); expected a bare Schema flatbuffer"
        )
    if len(data) < 8:
        raise DecodeError(f"invalid Arrow schema flatbuffer: only {len(data)} bytes")
    reader = Reader(data)
    root = reader.table(reader.uoffset(0, ""), "")
    fields = root.tables(1, "fields")
    if fields is None:
        raise DecodeError("invalid Arrow schema flatbuffer: the Schema has no fields vector")
    return reader, root, fields


def field_names(data: bytes) -> list[str]:
    """The names of the top-level fields of the Schema flatbuffer ``data`` (their types are
    not read: ``arrow_schema_reader.read_schema`` checks those)."""
    _, _, fields = schema_root(bytes(data))
    return [f.string(0, f"fields[{i}].name") or "" for i, f in enumerate(fields)]
