"""Registry of ODF unions: their variants in declaration order, codes and tags.

A union's FlatBuffers type code is the variant's 1-based position; its YAML tag (the
``kind`` key, RFC-013) is the variant's class name without the union's name as prefix.

The engine protocol's unions are registered on first use (``all_unions``): reading metadata
(``odf log``) then never imports the engine protocol's model.
"""

from __future__ import annotations

from functools import cache

from common.odf import events as ev
from common.odf import fragments as fr

METADATA_UNIONS: dict[str, tuple[type, ...]] = {
    "MetadataEvent": (
        ev.AddData,
        ev.ExecuteTransform,
        ev.Seed,
        ev.SetPollingSource,
        ev.SetTransform,
        ev.SetVocab,
        ev.SetAttachments,
        ev.SetInfo,
        ev.SetLicense,
        ev.SetDataSchema,
        ev.AddPushSource,
        ev.DisablePushSource,
        ev.DisablePollingSource,
    ),
    "FetchStep": (
        fr.FetchStepUrl,
        fr.FetchStepFilesGlob,
        fr.FetchStepContainer,
        fr.FetchStepMqtt,
    ),
    "PrepStep": (fr.PrepStepDecompress, fr.PrepStepPipe),
    "ReadStep": (
        fr.ReadStepCsv,
        fr.ReadStepGeoJson,
        fr.ReadStepEsriShapefile,
        fr.ReadStepParquet,
        fr.ReadStepJson,
        fr.ReadStepNdJson,
        fr.ReadStepNdGeoJson,
    ),
    "Transform": (fr.TransformSql,),
    "MergeStrategy": (
        fr.MergeStrategyAppend,
        fr.MergeStrategyLedger,
        fr.MergeStrategySnapshot,
    ),
    "EventTimeSource": (
        fr.EventTimeSourceFromMetadata,
        fr.EventTimeSourceFromPath,
        fr.EventTimeSourceFromSystemTime,
    ),
    "SourceCaching": (fr.SourceCachingForever,),
    "Attachments": (fr.AttachmentsEmbedded,),
}
"""The unions of metadata blocks (``fragments`` and ``events``)."""

_ENGINE_MODULE = "common.odf.engine_protocol"


@cache
def all_unions() -> dict[str, tuple[type, ...]]:
    """Every registered union: the metadata ones, then the engine protocol's."""
    from common.odf import engine_protocol as ep

    return {
        **METADATA_UNIONS,
        "TransformResponse": (
            ep.TransformResponseProgress,
            ep.TransformResponseSuccess,
            ep.TransformResponseInvalidQuery,
            ep.TransformResponseInternalError,
        ),
        "RawQueryResponse": (
            ep.RawQueryResponseProgress,
            ep.RawQueryResponseSuccess,
            ep.RawQueryResponseInvalidQuery,
            ep.RawQueryResponseInternalError,
        ),
        "ValidateQueryResponse": (
            ep.ValidateQueryResponseSuccess,
            ep.ValidateQueryResponseInvalidQuery,
            ep.ValidateQueryResponseInternalError,
        ),
        "MigrateQueryResponse": (
            ep.MigrateQueryResponseSuccess,
            ep.MigrateQueryResponseInvalidQuery,
            ep.MigrateQueryResponseInternalError,
        ),
        "QueryResponse": (
            ep.QueryResponseSuccess,
            ep.QueryResponseInvalidQuery,
            ep.QueryResponseInternalError,
        ),
        "SplitTransformResponse": (
            ep.SplitTransformResponseProgress,
            ep.SplitTransformResponseSuccess,
            ep.SplitTransformResponseInvalidQuery,
            ep.SplitTransformResponseInternalError,
        ),
        "HashDataFilesResponse": (
            ep.HashDataFilesResponseSuccess,
            ep.HashDataFilesResponseInvalidQuery,
            ep.HashDataFilesResponseInternalError,
        ),
    }


def variants(union: str) -> tuple[type, ...]:
    """The variants of the union named ``union``, in declaration order (KeyError if none)."""
    found = METADATA_UNIONS.get(union)
    return found if found is not None else all_unions()[union]


_UNION_OF: dict[type, str] = {v: name for name, vs in METADATA_UNIONS.items() for v in vs}


@cache
def _all_union_of() -> dict[type, str]:
    return {v: name for name, vs in all_unions().items() for v in vs}


def union_of(variant: type) -> str:
    """The name of the union ``variant`` belongs to (KeyError if it is no variant)."""
    name = _UNION_OF.get(variant)
    if name is not None:
        return name
    if getattr(variant, "__module__", None) == _ENGINE_MODULE:
        return _all_union_of()[variant]
    raise KeyError(variant)


def code_of(variant: type) -> int:
    """FlatBuffers union type code of ``variant`` (1-based declaration order)."""
    return variants(union_of(variant)).index(variant) + 1


def tag_of(variant: type) -> str:
    """YAML ``kind`` tag of ``variant``: its name without the union prefix."""
    union = union_of(variant)
    name = variant.__name__
    return name[len(union) :] if union != "MetadataEvent" and name.startswith(union) else name


def variant_by_tag(union: str, tag: str) -> type | None:
    """The variant of ``union`` whose tag is ``tag`` (case-insensitive, as the reference)."""
    for variant in variants(union):
        if tag_of(variant).lower() == tag.lower():
            return variant
    return None
