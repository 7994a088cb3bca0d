"""Ad-hoc SQL over the datasets of a workspace, run by the workspace's engine.

Every dataset the query mentions (see ``references``) becomes a view under its name, over all
its data files; ``aliases`` add views under other names. The request goes to an engine of the
given provider (embedded, container or remote: ``coordinator.engine``) as our
``ExecuteQuery`` extension; the engine writes the result as an Arrow IPC file in a private
directory of the workspace (where a container or remote engine can reach it), and only the
rows asked for are read back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc

from common.logs import get_logger
from common.odf import engine_protocol as ep
from common.odf.errors import ValidationError
from common.odf.fragments import SqlQueryStep, TransformSql
from common.odf.multihash import Multihash
from coordinator.dataset import Dataset
from coordinator.engine import EngineInvalidQueryError, EngineMounts, EngineSession
from coordinator.ingest.context import data_files
from coordinator.ingest.source_state import parse_rfc3339
from coordinator.query.references import mentioned_names, name_chains
from coordinator.query.result import QueryResult
from coordinator.tempdirs import owned_temp_dir
from coordinator.workspace import Workspace

log = get_logger(__name__)

ENGINE = "spark"
RESULT_FILE = "result.arrow"
_TMP_PREFIX = ".query-"
TABLE_NOT_FOUND = "TABLE_OR_VIEW_NOT_FOUND"
"""Spark's error class for an unknown table: the one error a hint about names can help."""


@dataclass(frozen=True, slots=True)
class QueryView:
    """One view of the query: a dataset under a name, as of ``as_of`` (default: its head)."""

    alias: str
    dataset: Dataset
    as_of: Multihash | None = None


def query_views(
    ws: Workspace, query: str, aliases: Mapping[str, str], as_of: Mapping[str, str] | None = None
) -> list[QueryView]:
    """The views ``query`` may use: the ``aliases`` (view name -> dataset name), then every
    dataset whose name it mentions (case-insensitive); ``as_of`` (dataset name -> block hash
    or RFC 3339 time) puts a dataset back to an earlier block (time travel)."""
    views = [QueryView(alias, ws.open_dataset(name)) for alias, name in aliases.items()]
    mentioned = mentioned_names(query)
    taken = {v.alias.lower() for v in views}
    for ds in ws.list_datasets():
        if ds.alias.lower() in mentioned and ds.alias.lower() not in taken:
            views.append(QueryView(ds.alias, ds))
    for name, when in (as_of or {}).items():
        ds = ws.open_dataset(name)
        used = [v for v in views if v.dataset.layout.root == ds.layout.root]
        if not used:
            raise ValidationError(f"the query does not use dataset {ds.alias!r}", path="--as-of")
        block = block_as_of(ds, when)
        views = [replace(v, as_of=block) if v in used else v for v in views]
    return views


AS_OF_MARK = "@"
"""``name@when`` in a query: dataset ``name`` as of ``when`` (a block hash, a unique prefix of
it, or an RFC 3339 time), as a table of its own (quoted: `` `name@2024-05-01T00:00:00Z` ``)."""


def views_as_named(ws: Workspace, query: str, as_of: str | None = None) -> list[QueryView]:
    """The views of ``query`` (``query_views``), ``name@when`` names included: each such
    name is a view of dataset ``name`` as of ``when`` (see ``AS_OF_MARK``); the others are
    as of ``as_of`` if given (a block or a time, as ``when``)."""
    suffixed: dict[str, tuple[str, str]] = {}
    for chain in name_chains(query):
        for part in chain.parts:
            name, mark, when = part.partition(AS_OF_MARK)
            if mark and name and when:
                suffixed[part] = (name, when)
    views = query_views(ws, query, {alias: name for alias, (name, _) in suffixed.items()})
    return [
        replace(v, as_of=block_as_of(v.dataset, suffixed[v.alias][1], path=v.alias))
        if v.alias in suffixed
        else replace(v, as_of=block_as_of(v.dataset, as_of, path="as_of"))
        if as_of
        else v
        for v in views
    ]


def block_as_of(ds: Dataset, when: str, *, path: str = "--as-of") -> Multihash:
    """The block ``when`` names: a block hash (or a unique prefix of 8 characters or more), or
    an RFC 3339 time (the newest block recorded at or before it); errors name ``path``."""
    text = when.strip()
    try:
        moment = parse_rfc3339(text)
    except ValueError:
        moment = None
    if moment is not None:
        for h, block in ds.iter_blocks():
            if block.system_time <= moment:
                return h
        raise ValidationError(
            f"dataset {ds.alias!r} has no block at or before {moment.isoformat()}", path=path
        )
    try:
        return ds.find_block(text, path=path)
    except ValidationError as e:
        raise ValidationError(f"{e.reason} (nor an RFC 3339 time)", path=path) from None


def run_query(
    ws: Workspace,
    query: str,
    engines: Callable[[EngineMounts], EngineSession],
    *,
    aliases: Mapping[str, str] | None = None,
    limit: int | None = None,
    as_of: Mapping[str, str] | None = None,
) -> QueryResult:
    """Run ``query`` on an engine of ``engines`` (a session for what the engine must see);
    read back at most ``limit`` rows."""
    views = query_views(ws, query, aliases or {}, as_of)
    with query_output(ws, query, views, engines) as (output, num_records):
        return QueryResult(read_rows(output, limit), num_records)


@contextmanager
def query_output(
    ws: Workspace,
    query: str,
    views: Sequence[QueryView],
    engines: Callable[[EngineMounts], EngineSession],
) -> Iterator[tuple[Path, int]]:
    """Run ``query`` over ``views`` on an engine of ``engines``; the Arrow IPC file the engine
    wrote the whole result to, and its number of rows, until the context exits (the file is
    removed then)."""
    planned = [(v, _query_input(v)) for v in views]
    inputs = [i for _, i in planned if i is not None]
    no_data = [v.alias for v, i in planned if i is None]
    ws.scratch_dir.mkdir(exist_ok=True)
    with owned_temp_dir(_TMP_PREFIX, ws.scratch_dir) as tmp:  # cleaned by the next run if killed
        output = Path(tmp) / RESULT_FILE
        request = ep.QueryRequest(
            inputs=tuple(inputs),
            transform=TransformSql(engine=ENGINE, queries=(SqlQueryStep(query=query),)),
            output_data_path=str(output),
        )
        mounts = EngineMounts.of([v.dataset.layout.data_dir for v in views], [Path(tmp)])
        log.info("query.start", views=[v.alias for v in views])
        with engines(mounts) as session:
            try:
                response = session.get(None).execute_query(request)
            except EngineInvalidQueryError as e:
                hint = _quoting_hint(query, views) + _no_data_hint(no_data)
                if not hint or TABLE_NOT_FOUND not in e.detail:
                    raise
                # Spark's first line names the problem; the rest is generic advice.
                raise EngineInvalidQueryError(e.detail.splitlines()[0] + hint) from None
        yield output, response.num_records


def read_rows(path: Path, limit: int | None) -> pa.Table:
    """The first ``limit`` rows (all when ``None``) of an Arrow IPC file, in memory: only the
    record batches needed are read."""
    with pa.OSFile(str(path), "rb") as source:
        reader = ipc.open_file(source)
        batches: list[pa.RecordBatch] = []
        rows = 0
        for i in range(reader.num_record_batches):
            if limit is not None and rows >= limit:
                break
            batch = reader.get_batch(i)
            batches.append(batch)
            rows += batch.num_rows
        table = pa.Table.from_batches(batches, schema=reader.schema)
    return table if limit is None else table.slice(0, limit)


def _query_input(view: QueryView) -> ep.QueryInput | None:
    """The engine's input for a view; ``None`` for a dataset with neither data nor schema."""
    state = view.dataset.state()
    head = view.as_of or state.head
    files = tuple(str(p) for p in data_files(view.dataset, head))
    schema = None if files else state.schema_bytes
    if not files and schema is None:
        log.info("query.no_data", dataset=view.dataset.alias)
        return None
    return ep.QueryInput(alias=view.alias, data_paths=files, schema=schema)


def _no_data_hint(names: Sequence[str]) -> str:
    if not names:
        return ""
    listed = ", ".join(repr(n) for n in names)
    return f" (no data yet, so no view: {listed})"


def _quoting_hint(query: str, views: Sequence[QueryView]) -> str:
    """A hint when a dataset name with dots is written as a multi-part name."""
    names = {v.dataset.alias.lower(): v.dataset.alias for v in views}
    for chain in name_chains(query):
        name = names.get(chain.dotted.lower())
        if len(chain.parts) > 1 and name is not None:
            return f" (quote dataset names that contain dots with backticks: `{name}`)"
    return ""
