"""``odf verify NAME... [--recursive] [--integrity]``: check datasets and replay transformations.

Prints one row per transaction (data block) with the outcome of its integrity checks and of
its replay, plus a row for every other problem (``refs/head``, non-data blocks). Any problem
is also printed on stderr, naming the dataset, the block and what differs, and the command
exits with status 1.

A derivative whose inputs are not in the workspace (a clone pulled without them) is checked
as far as it can be (hashes, links, rules, files) but not replayed: the report says which
inputs are absent and how to get them, and the command exits with status 3
(``INCOMPLETE_EXIT``) when nothing else was found.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from common.humanize import plural
from coordinator.app import VerifyOptions
from coordinator.cli.connect import add_daemon_argument, show_engine_starts, use_cases
from coordinator.cli.output import (
    OutputFormat,
    add_output_format_argument,
    render_document,
    render_rows,
)
from coordinator.cli.progress import terminal_progress
from coordinator.cli.terminal_text import visible
from coordinator.verify.errors import VerificationFailed
from coordinator.verify.replay import ReplayResult
from coordinator.verify.report import DatasetReport, Problem, TransactionResult

INCOMPLETE_EXIT = 3
"""Exit status of a verification that found no problem but could not check everything."""

COLUMNS = ("dataset", "block", "hash", "event", "offsets", "integrity", "replay", "detail")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "verify", help="check the integrity of datasets and replay their transformations"
    )
    p.add_argument("names", nargs="+", metavar="NAME", help="datasets to verify")
    p.add_argument(
        "-r", "--recursive", action="store_true", help="also verify every upstream dataset"
    )
    p.add_argument(
        "--integrity",
        action="store_true",
        help="check hashes, links and rules only; do not replay transformations",
    )
    add_output_format_argument(p, (OutputFormat.TABLE, OutputFormat.JSON))
    add_daemon_argument(p)
    p.set_defaults(handler=cmd_verify)


def cmd_verify(args: argparse.Namespace) -> int:
    with terminal_progress(args) as progress:
        what = ", ".join(args.names)
        checked = progress.task(f"verify {what}: files checked", unit="B")
        replays = progress.task(f"verify {what}: transactions replayed", unit="replays")

        def replayed(dataset: str, result: ReplayResult) -> None:
            replays.advance(1)
            _progress(dataset, result)

        app = use_cases(args)
        show_engine_starts(app, progress)
        options = VerifyOptions(
            recursive=args.recursive,
            integrity_only=args.integrity,
            on_replay=replayed,
            on_bytes=checked.advance,
        )
        reports = app.verify(args.names, options)
        checked.close()
        replays.close()
    if args.output_format == OutputFormat.JSON.value:
        render_document([report_document(r) for r in reports], OutputFormat.JSON)
    else:
        rows = [row for r in reports for row in report_rows(r)]
        render_rows(rows, COLUMNS, OutputFormat.TABLE, wide=args.wide)
        for r in reports:
            print(visible(summary_line(r)))
    failed = [r for r in reports if not r.ok]
    for r in failed:
        for problem in r.problems:
            print(visible(f"mismatch: {r.dataset}: {problem}"), file=sys.stderr)
    incomplete = [r for r in reports if not r.complete]
    for r in incomplete:
        print(visible(absent_inputs_hint(r)), file=sys.stderr)
    if failed:
        count = sum(len(r.problems) for r in failed)
        names = ", ".join(r.dataset for r in failed)
        raise VerificationFailed(f"verification failed: {count} problem(s) in {names}")
    return INCOMPLETE_EXIT if incomplete else 0


def absent_inputs_hint(report: DatasetReport) -> str:
    """Which inputs are absent and how to get them (from the clone's remote when known)."""
    absent = ", ".join(f"{a.alias} ({a.dataset_id})" for a in report.absent_inputs)
    remote = _clone_remote(report.dataset)
    if remote is not None:
        how = f"`odf pull {remote} --with-inputs` clones them from where {report.dataset} came"
    else:
        how = "pull or add them (`odf pull REPO/NAME`), then verify again"
    return (
        f"incomplete: {report.dataset}: inputs not in this workspace: {absent}; their links"
        f" were not checked and no transaction was replayed; {how}"
    )


def _clone_remote(name: str) -> str | None:
    from coordinator.dataset.provenance import provenance
    from coordinator.workspace import Workspace

    try:
        return provenance(Workspace.find().open_dataset(name).layout).clone_of
    except Exception:  # a hint only: the report stands without it
        return None


def _progress(dataset: str, result: ReplayResult) -> None:
    if sys.stderr.isatty():
        status = "ok" if result.ok else "FAILED"
        print(
            f"replayed {dataset} {result.block} ({result.kind}): {status} in {result.seconds:.1f}s",
            file=sys.stderr,
        )


# --- rendering ---------------------------------------------------------------------------------


def report_rows(report: DatasetReport) -> list[dict[str, Any]]:
    """One row per transaction, then one per problem outside of any transaction."""
    rows = [_transaction_row(report.dataset, t) for t in report.transactions]
    in_rows = {id(p) for t in report.transactions for p in t.problems}
    for p in report.problems:
        if id(p) not in in_rows:
            rows.append(_problem_row(report.dataset, p))
    return rows


def _transaction_row(dataset: str, t: TransactionResult) -> dict[str, Any]:
    o = t.offsets
    return {
        "dataset": dataset,
        "block": t.block.sequence_number,
        "hash": t.block.hash,
        "event": t.event,
        "offsets": f"{o.start}..{o.end}" if o else None,
        "integrity": t.integrity.value,
        "replay": t.replay.value,
        "detail": "; ".join(f"{p.check.value}: {p.message}" for p in t.problems) or None,
    }


def _problem_row(dataset: str, p: Problem) -> dict[str, Any]:
    return {
        "dataset": dataset,
        "block": p.block.sequence_number if p.block else None,
        "hash": p.block.hash if p.block else None,
        "event": None if p.block else "refs/head",
        "offsets": None,
        "integrity": "FAILED",
        "replay": None,
        "detail": f"{p.check.value}: {p.message}",
    }


def summary_line(report: DatasetReport) -> str:
    replayed = sum(1 for t in report.transactions if t.replay.value in ("ok", "FAILED"))
    transactions = plural(len(report.transactions), "transaction")
    what = f"{plural(report.blocks, 'block')}, {transactions}, {replayed} replayed"
    engines = sorted({t.engine for t in report.transactions if t.engine})
    with_engines = f", with engine {'; '.join(engines)}" if engines else ""
    if report.ok and not report.complete:
        absent = len(report.absent_inputs)
        return (
            f"{report.dataset}: INCOMPLETE ({what}): {absent} input{'s' if absent != 1 else ''}"
            " not in this workspace, nothing replayed"
        )
    if report.ok:
        return f"{report.dataset}: ok ({what}){with_engines}"
    problems = plural(len(report.problems), "problem")
    return f"{report.dataset}: FAILED, {problems} ({what}){with_engines}"


def report_document(report: DatasetReport) -> dict[str, Any]:
    return {
        "dataset": report.dataset,
        "kind": report.kind,
        "head": report.head,
        "ok": report.ok,
        "complete": report.complete,
        "absentInputs": [{"alias": a.alias, "id": a.dataset_id} for a in report.absent_inputs],
        "blocks": report.blocks,
        "replayed": report.replayed,
        "transactions": [
            {
                "sequenceNumber": t.block.sequence_number,
                "hash": t.block.hash,
                "event": t.event,
                "offsetInterval": (
                    {"start": t.offsets.start, "end": t.offsets.end} if t.offsets else None
                ),
                "integrity": t.integrity.value,
                "replay": t.replay.value,
                "engine": t.engine,
                "problems": [_problem_document(p) for p in t.problems],
            }
            for t in report.transactions
        ],
        "problems": [_problem_document(p) for p in report.problems],
    }


def _problem_document(p: Problem) -> dict[str, Any]:
    return {
        "check": p.check.value,
        "where": p.where,
        "sequenceNumber": p.block.sequence_number if p.block else None,
        "hash": p.block.hash if p.block else None,
        "message": p.message,
    }
