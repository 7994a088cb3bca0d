"""What the Flight SQL server says about itself and the workspace: the tables of the metadata
commands (``CommandGetSqlInfo``, ``CommandGetCatalogs``, ``CommandGetDbSchemas``,
``CommandGetTables``, ``CommandGetTableTypes``, ``CommandGetPrimaryKeys``: none here).

The workspace is one catalog (``odf``) with one schema (``datasets``); each dataset is a
``TABLE`` under its name. Queries name datasets bare (``SELECT * FROM weather``): the
catalog and schema only place the tables for clients that browse.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from coordinator.daemon.flight_sql_generated import flight_sql_pb2 as fsql
from coordinator.engine.installed import installed_version
from coordinator.workspace import Workspace

CATALOG = "odf"
DB_SCHEMA = "datasets"
TABLE_TYPE = "TABLE"
SERVER_NAME = "odf-py"

CATALOGS_SCHEMA = pa.schema([pa.field("catalog_name", pa.utf8(), nullable=False)])
DB_SCHEMAS_SCHEMA = pa.schema(
    [pa.field("catalog_name", pa.utf8()), pa.field("db_schema_name", pa.utf8(), nullable=False)]
)
TABLES_SCHEMA = pa.schema(
    [
        pa.field("catalog_name", pa.utf8()),
        pa.field("db_schema_name", pa.utf8()),
        pa.field("table_name", pa.utf8(), nullable=False),
        pa.field("table_type", pa.utf8(), nullable=False),
    ]
)
TABLES_WITH_SCHEMA_SCHEMA = TABLES_SCHEMA.append(
    pa.field("table_schema", pa.binary(), nullable=False)
)
TABLE_TYPES_SCHEMA = pa.schema([pa.field("table_type", pa.utf8(), nullable=False)])
PRIMARY_KEYS_SCHEMA = pa.schema(
    [
        pa.field("catalog_name", pa.utf8()),
        pa.field("db_schema_name", pa.utf8()),
        pa.field("table_name", pa.utf8(), nullable=False),
        pa.field("column_name", pa.utf8(), nullable=False),
        pa.field("key_name", pa.utf8()),
        pa.field("key_sequence", pa.int32(), nullable=False),
    ]
)

# --- SqlInfo -------------------------------------------------------------------------------------

_STRING, _BOOL, _BIGINT, _INT32, _STRING_LIST, _INT32_MAP = range(6)
SQL_INFO_VALUE = pa.dense_union(
    [
        pa.field("string_value", pa.utf8()),
        pa.field("bool_value", pa.bool_()),
        pa.field("bigint_value", pa.int64()),
        pa.field("int32_bitmask", pa.int32()),
        pa.field("string_list", pa.list_(pa.field("item", pa.utf8()))),
        pa.field(
            "int32_to_int32_list_map",
            pa.map_(pa.int32(), pa.list_(pa.field("item", pa.int32()))),
        ),
    ],
    type_codes=[_STRING, _BOOL, _BIGINT, _INT32, _STRING_LIST, _INT32_MAP],
)
SQL_INFO_SCHEMA = pa.schema(
    [pa.field("info_name", pa.uint32(), nullable=False), pa.field("value", SQL_INFO_VALUE)]
)
_CASE_INSENSITIVE = 1  # SqlSupportedCaseSensitivity: Spark resolves names case-insensitively


def sql_info() -> dict[int, tuple[int, Any]]:
    """Each SqlInfo code the server answers: (union slot, value)."""
    return {
        fsql.FLIGHT_SQL_SERVER_NAME: (_STRING, SERVER_NAME),
        fsql.FLIGHT_SQL_SERVER_VERSION: (_STRING, installed_version("odf-py") or "unknown"),
        fsql.FLIGHT_SQL_SERVER_ARROW_VERSION: (_STRING, pa.__version__),
        fsql.FLIGHT_SQL_SERVER_READ_ONLY: (_BOOL, True),
        fsql.FLIGHT_SQL_SERVER_SQL: (_BOOL, True),
        fsql.FLIGHT_SQL_SERVER_SUBSTRAIT: (_BOOL, False),
        fsql.FLIGHT_SQL_SERVER_TRANSACTION: (_INT32, 0),  # no transactions
        fsql.FLIGHT_SQL_SERVER_CANCEL: (_BOOL, True),
        fsql.FLIGHT_SQL_SERVER_STATEMENT_TIMEOUT: (_INT32, 0),
        fsql.FLIGHT_SQL_SERVER_TRANSACTION_TIMEOUT: (_INT32, 0),
        fsql.SQL_DDL_CATALOG: (_BOOL, False),
        fsql.SQL_DDL_SCHEMA: (_BOOL, False),
        fsql.SQL_DDL_TABLE: (_BOOL, False),
        fsql.SQL_IDENTIFIER_CASE: (_INT32, _CASE_INSENSITIVE),
        fsql.SQL_IDENTIFIER_QUOTE_CHAR: (_STRING, "`"),
        fsql.SQL_QUOTED_IDENTIFIER_CASE: (_INT32, _CASE_INSENSITIVE),
        fsql.SQL_ALL_TABLES_ARE_SELECTABLE: (_BOOL, True),
        fsql.SQL_SEARCH_STRING_ESCAPE: (_STRING, "\\"),
        fsql.SQL_SCHEMA_TERM: (_STRING, "schema"),
        fsql.SQL_CATALOG_TERM: (_STRING, "catalog"),
    }


def sql_info_table(wanted: Sequence[int]) -> pa.Table:
    """The rows of ``CommandGetSqlInfo``: the codes ``wanted`` the server knows (all when none
    are named), in the order asked."""
    known = sql_info()
    codes = [c for c in wanted if c in known] if wanted else sorted(known)
    children: list[list[Any]] = [[] for _ in SQL_INFO_VALUE]
    types, offsets = [], []
    for code in codes:
        slot, value = known[code]
        types.append(slot)
        offsets.append(len(children[slot]))
        children[slot].append(value)
    value_array = pa.UnionArray.from_dense(
        pa.array(types, pa.int8()),
        pa.array(offsets, pa.int32()),
        [
            pa.array(values, field.type)
            for values, field in zip(children, SQL_INFO_VALUE, strict=True)
        ],
        [field.name for field in SQL_INFO_VALUE],
        list(SQL_INFO_VALUE.type_codes),
    )
    return pa.Table.from_arrays([pa.array(codes, pa.uint32()), value_array], schema=SQL_INFO_SCHEMA)


# --- catalogs, schemas, tables -------------------------------------------------------------------


def like(pattern: str | None, text: str) -> bool:
    """SQL ``LIKE`` of the metadata commands: ``%`` any run, ``_`` any one character, ``\\``
    escapes; no pattern matches everything."""
    if pattern is None:
        return True
    out, escaped = [], False
    for ch in pattern:
        if escaped:
            out.append(re.escape(ch))
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        else:
            out.append(re.escape(ch))
    return re.fullmatch("".join(out), text, re.DOTALL) is not None


def catalogs_table() -> pa.Table:
    return pa.Table.from_pylist([{"catalog_name": CATALOG}], schema=CATALOGS_SCHEMA)


def db_schemas_table(command: Any) -> pa.Table:
    catalog = command.catalog if command.HasField("catalog") else None
    pattern = (
        command.db_schema_filter_pattern if command.HasField("db_schema_filter_pattern") else None
    )
    rows = []
    if catalog in (None, CATALOG) and like(pattern, DB_SCHEMA):
        rows.append({"catalog_name": CATALOG, "db_schema_name": DB_SCHEMA})
    return pa.Table.from_pylist(rows, schema=DB_SCHEMAS_SCHEMA)


def tables_table(ws: Workspace, command: Any) -> pa.Table:
    """The datasets as tables, filtered as ``CommandGetTables`` asks; with each one's Arrow
    schema (IPC-serialized; empty for a dataset with no schema yet) if it asks."""
    catalog = command.catalog if command.HasField("catalog") else None
    schema_pattern = (
        command.db_schema_filter_pattern if command.HasField("db_schema_filter_pattern") else None
    )
    name_pattern = (
        command.table_name_filter_pattern if command.HasField("table_name_filter_pattern") else None
    )
    types = list(command.table_types)
    schema = TABLES_WITH_SCHEMA_SCHEMA if command.include_schema else TABLES_SCHEMA
    rows: list[dict[str, Any]] = []
    if catalog not in (None, CATALOG) or not like(schema_pattern, DB_SCHEMA):
        return pa.Table.from_pylist(rows, schema=schema)
    if types and TABLE_TYPE not in types:
        return pa.Table.from_pylist(rows, schema=schema)
    for ds in ws.list_datasets():
        if not like(name_pattern, ds.alias):
            continue
        row: dict[str, Any] = {
            "catalog_name": CATALOG,
            "db_schema_name": DB_SCHEMA,
            "table_name": ds.alias,
            "table_type": TABLE_TYPE,
        }
        if command.include_schema:
            arrow_schema = ds.state().arrow_schema() or pa.schema([])
            row["table_schema"] = arrow_schema.serialize().to_pybytes()
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=schema)


def table_types_table() -> pa.Table:
    return pa.Table.from_pylist([{"table_type": TABLE_TYPE}], schema=TABLE_TYPES_SCHEMA)
