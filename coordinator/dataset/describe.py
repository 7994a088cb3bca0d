"""One-line descriptions of metadata events, for ``odf log`` and similar listings."""

from __future__ import annotations

from datetime import datetime

from common.humanize import human_time, plural
from common.odf import events
from common.odf.errors import OdfError
from common.odf.fragments import DataSlice, TransformSql
from common.odf.unions import tag_of


def describe_event(event: events.MetadataEvent) -> str:
    """The key fields of an event as short ``key=value`` text."""
    parts = _parts(event)
    return ", ".join(p for p in parts if p)


def _parts(event: events.MetadataEvent) -> list[str]:
    match event:
        case events.Seed():
            return [f"id={event.dataset_id}", f"kind={event.dataset_kind.value}"]
        case events.AddData():
            state = event.new_source_state
            return [
                *_data_parts(event.new_data, event.prev_offset, event.new_watermark),
                f"sourceState={state.source_name}:{state.kind}={state.value}" if state else "",
            ]
        case events.ExecuteTransform():
            advanced = sum(1 for i in event.query_inputs if i.new_block_hash is not None)
            return [
                *_data_parts(event.new_data, event.prev_offset, event.new_watermark),
                f"inputs={advanced}/{len(event.query_inputs)} advanced",
                f"checkpoint={event.new_checkpoint.physical_hash}" if event.new_checkpoint else "",
            ]
        case events.SetDataSchema():
            return [_schema_text(event.schema)]
        case events.SetTransform():
            aliases = ",".join(i.alias or i.dataset_ref for i in event.inputs)
            return [*_transform_parts(event.transform), f"inputs={aliases}"]
        case events.SetPollingSource():
            return [
                f"fetch={tag_of(type(event.fetch))}",
                f"read={tag_of(type(event.read))}",
                f"merge={tag_of(type(event.merge))}",
                *(_transform_parts(event.preprocess) if event.preprocess else []),
            ]
        case events.AddPushSource():
            return [
                f"source={event.source_name}",
                f"read={tag_of(type(event.read))}",
                f"merge={tag_of(type(event.merge))}",
            ]
        case _:
            return _minor_parts(event)


def _minor_parts(event: events.MetadataEvent) -> list[str]:
    match event:
        case events.SetVocab():
            return [
                f"{k}={v}"
                for k, v in (
                    ("offset", event.offset_column),
                    ("op", event.operation_type_column),
                    ("systemTime", event.system_time_column),
                    ("eventTime", event.event_time_column),
                )
                if v is not None
            ]
        case events.SetInfo():
            keywords = ",".join(event.keywords or ())
            return [
                f"description={event.description!r}" if event.description else "",
                f"keywords={keywords}" if keywords else "",
            ]
        case events.SetLicense():
            return [f"license={event.short_name}"]
        case events.SetAttachments():
            return [f"attachments={len(event.attachments.items)}"]
        case events.DisablePushSource():
            return [f"source={event.source_name}"]
        case events.DisablePollingSource():
            return []
    return []


def _data_parts(
    new_data: DataSlice | None, prev_offset: int | None, watermark: datetime | None
) -> list[str]:
    if new_data is not None:
        o = new_data.offset_interval
        data = f"offsets=[{o.start}, {o.end}] ({plural(o.end - o.start + 1, 'record')})"
    else:
        data = f"no data (prevOffset={prev_offset})"
    return [data, f"watermark={human_time(watermark)}" if watermark else ""]


def _transform_parts(transform: TransformSql) -> list[str]:
    return [
        f"engine={transform.engine}",
        f"version={transform.version}" if transform.version else "",
        f"queries={len(transform.steps())}",
    ]


def _schema_text(schema: bytes) -> str:
    """The schema's column names, read without pyarrow (``odf log`` starts in a fraction of
    the time); the column types are not decoded here."""
    from common.serde.arrow_schema_tables import field_names

    try:
        names = field_names(schema)
    except OdfError as e:  # a listing should still show the other blocks
        return f"schema=<undecodable: {e}>"
    return f"columns={len(names)}: " + ", ".join(names)
