"""Root tables of the engine response messages: ``XRoot { value: X; }``.

A FlatBuffers union cannot be a buffer's root, so each response union is wrapped in a
one-field table (``TransformResponseRoot`` and ``RawQueryResponseRoot`` in ``fbs/odf.fbs``,
the others in ``fbs/engine_ext.fbs``).
"""

from __future__ import annotations

from dataclasses import dataclass

from common.odf import engine_protocol as ep


@dataclass(frozen=True, slots=True, kw_only=True)
class TransformResponseRoot:
    value: ep.TransformResponse


@dataclass(frozen=True, slots=True, kw_only=True)
class RawQueryResponseRoot:
    value: ep.RawQueryResponse


@dataclass(frozen=True, slots=True, kw_only=True)
class ValidateQueryResponseRoot:
    value: ep.ValidateQueryResponse


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrateQueryResponseRoot:
    value: ep.MigrateQueryResponse


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryResponseRoot:
    value: ep.QueryResponse


@dataclass(frozen=True, slots=True, kw_only=True)
class SplitTransformResponseRoot:
    value: ep.SplitTransformResponse


@dataclass(frozen=True, slots=True, kw_only=True)
class HashDataFilesResponseRoot:
    value: ep.HashDataFilesResponse
