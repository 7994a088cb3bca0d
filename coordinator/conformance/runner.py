"""Running cases against an engine under test: requests built from the case, one transaction
after another (each checkpoint handed to the next), answers compared with the case.

A case runs in its own directories (inputs written as Parquet slices, one file per slice with
contiguous offsets and the system columns first, as a coordinator hands them to an engine);
the first failing transaction ends the case, since later ones depend on its state.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from common.logs import get_logger
from common.odf import engine_protocol as ep
from common.odf.fragments import (
    DatasetVocabulary,
    OffsetInterval,
    SqlQueryStep,
    TemporalTable,
    TransformSql,
    Watermark,
)
from common.odf.identity import DatasetID
from common.serde.arrow_schema import decode_arrow_schema, encode_arrow_schema
from coordinator.config import ExchangeFormat
from coordinator.conformance.case import (
    Case,
    Dialects,
    ErrorClass,
    Expect,
    InputSpec,
    Kind,
    Row,
    Transaction,
    TxInput,
)
from coordinator.conformance.compare import (
    Answer,
    Failure,
    check_outcome,
    check_records,
    check_transform,
)
from coordinator.conformance.engines import EngineUnderTest
from coordinator.conformance.values import arrow_type, parse_op, parse_time, to_arrow_value
from coordinator.engine.errors import EngineError, EngineInternalError, EngineInvalidQueryError

log = get_logger(__name__)

DEFAULT_SYSTEM_TIME = "2030-01-01T00:00:00Z"
"""Transaction ``i`` runs at this time plus ``i`` hours unless the case says otherwise."""
OUTPUT_ID = DatasetID.new_seeded(b"conformance-output")


class Status(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    KNOWN_DIFFERENCE = "known-difference"
    """Failed as the case's ``knownDifference`` says this engine does (not a failure)."""


@dataclass(frozen=True, slots=True)
class CaseResult:
    case: Case
    status: Status
    failures: tuple[Failure, ...] = ()
    transaction: int | None = None
    """The transaction that failed (transform cases)."""
    reason: str = ""
    """Why it was skipped."""
    seconds: float = 0.0

    @property
    def rules(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f.rule for f in self.failures))

    def summary(self) -> str:
        if self.status is Status.SKIPPED:
            return self.reason
        if self.status is Status.KNOWN_DIFFERENCE:
            return f"known difference: {self.case.known_difference}"
        if self.status is Status.PASSED:
            return ""
        where = f"transaction {self.transaction}: " if self.transaction is not None else ""
        return where + "\n".join(str(f) for f in self.failures)


@dataclass(frozen=True, slots=True)
class RunOptions:
    dialect: str = "spark"
    capabilities: frozenset[str] | None = None
    """What the engine declares (None: everything)."""
    exchange: ExchangeFormat = ExchangeFormat.PARQUET
    """How data files are exchanged: Parquet (the spec's, default) or Arrow IPC files
    (``.arrow``: inputs written as such, the output path ends in .arrow)."""


def skip_reason(case: Case, options: RunOptions) -> str | None:
    if options.capabilities is not None:
        missing = sorted(case.capabilities - options.capabilities)
        if missing:
            return f"needs capability {', '.join(missing)}"
    dialects = case.dialects()
    if options.dialect not in dialects:
        return f"no {options.dialect} variant (has {', '.join(sorted(dialects)) or 'none'})"
    return None


def run_cases(
    engine: EngineUnderTest,
    cases: Iterable[Case],
    options: RunOptions | None = None,
    on_result: Callable[[CaseResult], None] | None = None,
) -> list[CaseResult]:
    results = []
    for case in cases:
        result = run_case(engine, case, options)
        if on_result is not None:
            on_result(result)
        results.append(result)
    return results


def run_case(engine: EngineUnderTest, case: Case, options: RunOptions | None = None) -> CaseResult:
    options = options or RunOptions()
    reason = skip_reason(case, options)
    if reason is not None:
        return CaseResult(case, Status.SKIPPED, reason=reason)
    started = time.monotonic()
    run = _CaseRun(engine, case, options.dialect, options.exchange)
    try:
        failures, tx = run.run()
    finally:
        run.clean()
    status = Status.FAILED if failures else Status.PASSED
    if case.known_difference is not None:
        if failures:
            status = Status.KNOWN_DIFFERENCE
        else:
            status = Status.FAILED
            failures = [
                Failure(
                    "known-difference",
                    f"the case passes, so the known difference ({case.known_difference}) is"
                    " gone: remove knownDifference from the case",
                )
            ]
    log.debug("conformance.case", case=case.name, status=status.value)
    return CaseResult(
        case, status, tuple(failures), tx, seconds=round(time.monotonic() - started, 3)
    )


@dataclass
class _InputState:
    spec: InputSpec
    id: DatasetID
    columns: dict[str, str]
    next_offset: int = 0
    files: list[str] = field(default_factory=list)
    schema_file: str | None = None

    def __post_init__(self) -> None:
        self.next_offset = self.spec.first_offset

    @property
    def vocab(self) -> DatasetVocabulary:
        return DatasetVocabulary(event_time_column=self.spec.event_time_column)

    def schema(self) -> pa.Schema:
        return pa.schema(
            [
                pa.field("offset", pa.int64(), nullable=False),
                pa.field("op", pa.int32(), nullable=False),
                pa.field("system_time", pa.timestamp("ms", tz="UTC"), nullable=False),
                pa.field(self.spec.event_time_column, arrow_type(self.spec.event_time)),
                *(pa.field(n, arrow_type(t)) for n, t in self.columns.items()),
            ]
        )


class _CaseRun:
    def __init__(
        self, engine: EngineUnderTest, case: Case, dialect: str, exchange: ExchangeFormat
    ) -> None:
        self.suffix = ".arrow" if exchange is ExchangeFormat.ARROW else ".parquet"
        self.engine = engine
        self.case = case
        self.dialect = dialect
        self.in_dir = engine.dirs.host_in / case.name
        self.out_dir = engine.dirs.host_out / case.name
        for d in (self.in_dir, self.out_dir):
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)

    def clean(self) -> None:
        for d in (self.in_dir, self.out_dir):
            shutil.rmtree(d, ignore_errors=True)

    def path(self, host: Path) -> str:
        return self.engine.dirs.engine_path(host)

    def transform(self, dialects: Dialects | None) -> TransformSql:
        spec = dialects.get(self.dialect) if dialects is not None else None
        assert spec is not None  # skip_reason checked every transform has this dialect
        return TransformSql(
            engine=self.dialect,
            queries=tuple(SqlQueryStep(alias=q.alias, query=q.query) for q in spec.queries),
            temporal_tables=tuple(
                TemporalTable(name=t.name, primary_key=t.primary_key) for t in spec.temporal_tables
            )
            or None,
        )

    def run(self) -> tuple[list[Failure], int | None]:
        match self.case.kind:
            case Kind.TRANSFORM:
                return self.run_transactions()
            case Kind.RAW_QUERY:
                return self.run_raw_query(), None
            case Kind.VALIDATE:
                return self.run_validate(), None

    # --- transform cases --------------------------------------------------------------------

    def run_transactions(self) -> tuple[list[Failure], int | None]:
        case = self.case
        inputs = [
            _InputState(i, DatasetID.new_seeded(i.alias.encode()), dict(i.columns))
            for i in case.inputs
        ]
        next_offset = case.next_offset
        prev_checkpoint: str | None = None
        current = case.transform
        base = parse_time(DEFAULT_SYSTEM_TIME, case.date)
        for tx in case.transactions:
            system_time = (
                parse_time(tx.system_time, case.date)
                if tx.system_time is not None
                else base + timedelta(hours=tx.index)
            )
            tx_dir = self.out_dir / f"tx-{tx.index}"
            tx_dir.mkdir()
            if tx.corrupt_checkpoint:
                prev_checkpoint = self.corrupt_checkpoint(tx_dir)
            query_inputs = tuple(self.input_entry(s, tx, system_time) for s in inputs)
            data_host = tx_dir / ("data.arrow" if self.suffix == ".arrow" else "data")
            checkpoint_host = tx_dir / "checkpoint"
            common: dict[str, Any] = {
                "dataset_id": OUTPUT_ID,
                "dataset_alias": "conformance-output",
                "system_time": system_time,
                "vocab": DatasetVocabulary(event_time_column=case.event_time_column),
                "query_inputs": query_inputs,
                "next_offset": next_offset,
                "prev_checkpoint_path": prev_checkpoint,
                "new_checkpoint_path": self.path(checkpoint_host),
                "new_data_path": self.path(data_host),
            }
            if tx.migrate is not None:
                request: Any = ep.MigrateQueryRequest(
                    prev_transform=self.transform(current),
                    new_transform=self.transform(tx.migrate),
                    **common,
                )
                call: Callable[[Any], Any] = self.engine.client.migrate_query
                current = tx.migrate
            else:
                request = ep.TransformRequest(transform=self.transform(current), **common)
                call = self.engine.client.execute_transform
            answer, fatal = _answer(partial(call, request), data_host, checkpoint_host)
            check = partial(
                self.check_transaction,
                answer=answer,
                next_offset=next_offset,
                system_time=system_time,
                transform=current,
                inputs=inputs,
            )
            failures = fatal or check_outcome(tx.expect, answer, check)
            if failures:
                return failures, tx.index
            if answer.error is None:
                if answer.interval is not None:
                    next_offset = answer.interval[1] + 1
                prev_checkpoint = self.path(checkpoint_host) if answer.checkpoint else None
        return [], None

    def check_transaction(
        self,
        expect: Expect,
        *,
        answer: Answer,
        next_offset: int,
        system_time: datetime,
        transform: Dialects | None,
        inputs: list[_InputState],
    ) -> list[Failure]:
        """A successful answer against ``expect``; an output schema expected of a transaction
        without data is the one ValidateQuery gives for the transform and today's inputs."""
        failures = check_transform(
            expect,
            answer,
            next_offset=next_offset,
            system_time=system_time,
            day=self.case.date,
            event_time=self.case.event_time_column,
        )
        if answer.table is not None or expect.records != () or not expect.schema_checks():
            return failures
        answer, fatal, schema = self.validate(transform, inputs)
        if fatal or answer.error is not None:
            what = "; ".join(map(str, fatal)) or f"{answer.error}: {answer.error_message}"
            return [*failures, Failure("schema", f"the output schema without data: {what}")]
        return failures + check_records(
            Expect(columns=expect.columns, types=expect.types, nullable=expect.nullable),
            schema.empty_table(),
            self.case.date,
            system=False,
        )

    def corrupt_checkpoint(self, tx_dir: Path) -> str:
        """A damaged checkpoint in place of the previous one (truncated, then garbage)."""
        host = tx_dir / "damaged-checkpoint"
        host.write_bytes(b"\x00not a checkpoint\xff" * 8)
        return self.path(host)

    def input_entry(
        self, state: _InputState, tx: Transaction, system_time: datetime
    ) -> ep.TransformRequestInput:
        part = tx.inputs.get(state.spec.alias)
        slices = part.slices if part is not None else ()
        if part is not None and part.columns is not None:
            state.columns = dict(part.columns)
            state.schema_file = None
        start = state.next_offset
        paths = []
        for n, rows in enumerate(slices):
            host = self.in_dir / state.spec.alias / f"slice-{len(state.files):04d}{self.suffix}"
            assert part is not None  # there are slices
            before = part.before if n == 0 else ()
            after = part.after if n == len(slices) - 1 else ()
            self.write_slice(state, rows, host, system_time, before, after)
            state.files.append(self.path(host))
            paths.append(self.path(host))
            state.schema_file = self.path(host)
        if state.schema_file is None:
            host = self.in_dir / state.spec.alias / f"schema-{tx.index}{self.suffix}"
            self.write_slice(state, (), host, system_time)
            state.schema_file = self.path(host)
        return ep.TransformRequestInput(
            dataset_id=state.id,
            dataset_alias=state.spec.alias,
            query_alias=state.spec.alias,
            vocab=state.vocab,
            offset_interval=(
                OffsetInterval(start=start, end=state.next_offset - 1) if paths else None
            ),
            data_paths=tuple(paths),
            schema_file=state.schema_file,
            explicit_watermarks=self.watermarks(part, system_time),
        )

    def watermarks(self, part: TxInput | None, system_time: datetime) -> tuple[Watermark, ...]:
        """The input's explicit watermarks, in the case's order (by default at the
        transaction's system time)."""
        day = self.case.date
        return tuple(
            Watermark(
                system_time=parse_time(m.system_time, day) if m.system_time else system_time,
                event_time=parse_time(m.event_time, day),
            )
            for m in (part.watermarks if part is not None else ())
        )

    def write_slice(
        self,
        state: _InputState,
        rows: Iterable[Row],
        host: Path,
        system_time: datetime,
        before: tuple[Row, ...] = (),
        after: tuple[Row, ...] = (),
    ) -> None:
        """One file: ``rows`` at the input's next offsets, with ``before`` at the offsets
        ahead of them and ``after`` at the offsets past them (outside the interval); a row's
        own ``system_time`` wins over the transaction's."""
        rows = list(rows)
        n = len(rows)
        every = [*before, *rows, *after]
        schema = state.schema()
        first = state.next_offset - len(before)
        columns: dict[str, list[Any]] = {
            "offset": list(range(first, first + len(every))),
            "op": [parse_op(r.get("op", 0)) for r in every],
            "system_time": [
                parse_time(r["system_time"], self.case.date) if "system_time" in r else system_time
                for r in every
            ],
        }
        for f in list(schema)[3:]:
            columns[f.name] = [to_arrow_value(r.get(f.name), f.type, self.case.date) for r in every]
        host.parent.mkdir(parents=True, exist_ok=True)
        self.write_file(pa.table(columns, schema=schema), host)
        state.next_offset += n

    def write_file(self, table: pa.Table, host: Path) -> None:
        if self.suffix == ".arrow":
            with pa.OSFile(str(host), "wb") as sink, ipc.new_file(sink, table.schema) as writer:
                writer.write_table(table)
        else:
            pq.write_table(table, host)

    # --- raw queries and validation -----------------------------------------------------------

    def run_raw_query(self) -> list[Failure]:
        case = self.case
        assert case.expect is not None
        paths: tuple[str, ...] = ()
        if case.raw_input is not None:
            schema = pa.schema(
                [pa.field(n, arrow_type(t)) for n, t in case.raw_input.columns.items()]
            )
            host = self.in_dir / f"raw{self.suffix}"
            columns = {
                f.name: [
                    to_arrow_value(r.get(f.name), f.type, case.date) for r in case.raw_input.rows
                ]
                for f in schema
            }
            self.write_file(pa.table(columns, schema=schema), host)
            paths = (self.path(host),)
        out = self.out_dir / "result"
        request = ep.RawQueryRequest(
            input_data_paths=paths,
            transform=self.transform(case.transform),
            output_data_path=self.path(out),
        )
        holder: list[Any] = []
        answer, fatal = _answer(
            lambda: holder.append(self.engine.client.execute_raw_query(request)), out, None
        )

        def check(expect: Expect) -> list[Failure]:
            if answer.table is None:
                return [Failure("raw-query", "no result file written")]
            failures = check_records(expect, answer.table, case.date, system=False)
            num = holder[0].num_records if holder else None
            if num != answer.table.num_rows:
                failures.append(
                    Failure("raw-query", f"num_records {num}, the file has {answer.table.num_rows}")
                )
            return failures

        return fatal or check_outcome(case.expect, answer, check)

    def run_validate(self) -> list[Failure]:
        case = self.case
        assert case.expect is not None
        states = [_InputState(i, DatasetID.new_seeded(b"v"), dict(i.columns)) for i in case.inputs]
        answer, fatal, schema = self.validate(case.transform, states, case.prev_transform)
        return fatal or check_outcome(
            case.expect,
            answer,
            lambda expect: check_records(expect, schema.empty_table(), case.date, system=False),
        )

    def validate(
        self,
        transform: Dialects | None,
        inputs: list[_InputState],
        prev_transform: Dialects | None = None,
    ) -> tuple[Answer, list[Failure], pa.Schema]:
        """ValidateQuery for ``transform`` over the inputs' current schemas: the answer, a
        broken protocol, and the output schema (empty when there is none)."""
        request = ep.ValidateQueryRequest(
            dataset_alias="conformance-output",
            vocab=DatasetVocabulary(event_time_column=self.case.event_time_column),
            transform=self.transform(transform),
            query_inputs=tuple(
                ep.ValidateQueryInput(
                    query_alias=i.spec.alias,
                    schema=encode_arrow_schema(i.schema()),
                    vocab=i.vocab,
                )
                for i in inputs
            ),
            prev_transform=self.transform(prev_transform) if prev_transform is not None else None,
        )
        schema: list[pa.Schema] = []

        def call() -> None:
            response = self.engine.client.validate_query(request)
            schema.append(decode_arrow_schema(response.output_schema))

        answer, fatal = _answer(call, None, None)
        return answer, fatal, schema[0] if schema else pa.schema([])


def _answer(
    call: Callable[[], Any], data: Path | None, checkpoint: Path | None
) -> tuple[Answer, list[Failure]]:
    """Make the call; the engine's answer, or a failure when it broke the protocol."""
    try:
        response = call()
    except EngineInvalidQueryError as e:
        return Answer(error=ErrorClass.INVALID_QUERY, error_message=e.detail), []
    except EngineInternalError as e:
        return Answer(error=ErrorClass.INTERNAL_ERROR, error_message=str(e)), []
    except EngineError as e:
        return Answer(), [Failure("protocol", str(e))]
    interval = getattr(response, "new_offset_interval", None)
    table = None
    if data is not None and data.exists():
        try:
            table = read_table(data)
        except (OSError, pa.ArrowException) as e:
            return Answer(), [Failure("data-slice", f"unreadable output {data.name}: {e}")]
    return (
        Answer(
            table=table,
            interval=(interval.start, interval.end) if interval is not None else None,
            watermark=getattr(response, "new_watermark", None),
            checkpoint=checkpoint is not None and checkpoint.exists(),
        ),
        [],
    )


def read_table(path: Path) -> pa.Table:
    """An output file: Parquet, or Arrow IPC (file or stream) recognised by content."""
    with open(path, "rb") as f:
        head = f.read(6)
    if head == b"ARROW1":
        with ipc.open_file(path) as reader:
            return reader.read_all()
    if head[:4] == b"PAR1":
        return pq.read_table(path)
    with pa.OSFile(str(path)) as source:
        return ipc.open_stream(source).read_all()
