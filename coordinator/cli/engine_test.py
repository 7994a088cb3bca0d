"""``odf engine test``: run the engine conformance kit against an engine.

``odf engine test (--image IMAGE | --address HOST:PORT | --embedded) [--cases DIR]
[--filter PATTERN] [--capabilities LIST] [--dialect NAME] [-o table|json|junit]``

Prints one row per case (passed, failed with the rules it breaks and a row diff, skipped for a
capability or dialect the engine does not declare) and a summary on stderr; exits 1 when any
case fails. ``-o junit`` prints JUnit XML for CI systems (``--report FILE`` writes the chosen
format to a file instead of stdout).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.odf.errors import OdfError
from coordinator.cli.arguments import command_group
from coordinator.cli.output import render_document, render_rows
from coordinator.cli.progress import terminal_progress
from coordinator.tempdirs import owned_temp_dir

if TYPE_CHECKING:  # the kit (jsonschema, pyarrow) is imported when the command runs
    from coordinator.conformance.engines import EngineTarget
    from coordinator.conformance.runner import CaseResult, RunOptions

COLUMNS = ("case", "status", "rules", "seconds", "detail")
FORMATS = ("table", "json", "junit")
EXCHANGES = ("parquet", "arrow")
CAPABILITY_ALL = "all"


def register(subparsers: Any) -> None:
    commands = command_group(subparsers, "engine", "engine tools: the conformance kit")
    p = commands.add_parser(
        "test",
        help="certify an engine against the ODF engine contract (the conformance kit)",
        description="Run the conformance cases against an engine: an image (run as the "
        "reference coordinator runs engines), an engine serving at an address (sharing this "
        "machine's files), or the embedded engine.",
    )
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--image", metavar="IMAGE", help="an engine image to run")
    target.add_argument(
        "--address", metavar="HOST:PORT", help="an engine already serving (or unix:/path)"
    )
    target.add_argument("--embedded", action="store_true", help="this package's Spark engine")
    p.add_argument(
        "--cases", metavar="DIR", type=Path, help="a directory of cases (default: the kit's)"
    )
    p.add_argument(
        "--filter", metavar="PATTERN", help="only cases whose name matches (glob or substring)"
    )
    p.add_argument(
        "--capabilities",
        metavar="LIST",
        default=CAPABILITY_ALL,
        help="comma-separated capabilities the engine declares; cases needing others are"
        " skipped (default: all)",
    )
    p.add_argument(
        "--dialect", default="spark", help="the SQL dialect of the engine (default: spark)"
    )
    p.add_argument(
        "--exchange",
        choices=EXCHANGES,
        default=EXCHANGES[0],
        help="data files as Parquet (default, as the spec and kamu-cli) or Arrow IPC files",
    )
    p.add_argument(
        "--workdir",
        metavar="DIR",
        type=Path,
        help="where exchange files go (default: a temporary directory; a remote engine must"
        " see it at the same path)",
    )
    p.add_argument("-o", "--output-format", choices=FORMATS, default="table")
    p.add_argument("--report", metavar="FILE", type=Path, help="write the report to FILE")
    p.set_defaults(handler=cmd_engine_test)


def parse_capabilities(text: str) -> frozenset[str] | None:
    if text.strip() == CAPABILITY_ALL:
        return None
    return frozenset(c.strip() for c in text.split(",") if c.strip())


def engine_target(args: argparse.Namespace) -> EngineTarget:
    from coordinator.conformance.engines import AddressTarget, EmbeddedTarget, ImageTarget

    if args.image:
        return ImageTarget(args.image)
    if args.address:
        return AddressTarget(args.address)
    return EmbeddedTarget()


def cmd_engine_test(args: argparse.Namespace) -> int:
    from coordinator.config import ExchangeFormat
    from coordinator.conformance.loader import load_cases
    from coordinator.conformance.report import summary_line
    from coordinator.conformance.runner import RunOptions, Status

    cases = load_cases(args.cases, args.filter)
    if not cases:
        raise OdfError(f"no case matches --filter {args.filter!r}")
    options = RunOptions(
        dialect=args.dialect,
        capabilities=parse_capabilities(args.capabilities),
        exchange=ExchangeFormat(args.exchange),
    )
    target = engine_target(args)
    with terminal_progress(args) as progress:
        task = progress.task(f"conformance: {target.description}", total=len(cases), unit="cases")

        def done(result: CaseResult) -> None:
            task.advance(1)
            if result.status is Status.FAILED:
                print(f"FAIL {result.case.name}: {result.summary()}", file=sys.stderr)

        if args.workdir is not None:
            args.workdir.mkdir(parents=True, exist_ok=True)
            results = _run(target, args.workdir, cases, options, done)
        else:
            with owned_temp_dir("odf-conformance-") as workdir:
                results = _run(target, workdir, cases, options, done)
        task.close()
    _render(results, target.description, args)
    print(summary_line(results, target.description), file=sys.stderr)
    return 1 if any(r.status is Status.FAILED for r in results) else 0


def _run(
    target: EngineTarget, workdir: Path, cases: list[Any], options: RunOptions, done: Any
) -> list[CaseResult]:
    from coordinator.conformance.runner import run_cases

    with target.start(workdir) as engine:
        return run_cases(engine, cases, options, done)


def _render(results: list[CaseResult], engine: str, args: argparse.Namespace) -> None:
    from coordinator.conformance.report import document, junit_xml, result_row

    out = open(args.report, "w", encoding="utf-8") if args.report else sys.stdout  # noqa: SIM115
    try:
        if args.output_format == "junit":
            out.write(junit_xml(results, engine))
        elif args.output_format == "json":
            render_document(document(results, engine), "json", out=out)
        else:
            rows = []
            for r in results:
                row = result_row(r)
                row["rules"] = ", ".join(row["rules"])
                row["detail"] = row["detail"].split("\n", 1)[0]
                rows.append(row)
            render_rows(rows, COLUMNS, "table", out=out)
    finally:
        if out is not sys.stdout:
            out.close()
