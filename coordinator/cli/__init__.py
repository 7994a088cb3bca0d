"""The ``odf`` command line.

Each command group lives in its own module with a ``register(subparsers)`` function that
adds its sub-commands; a command's handler takes the parsed arguments and returns an exit
code. Errors of this project (``OdfError``) become one line on stderr and exit code 1.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Sequence

from common.logs import configure_logging
from common.odf.errors import OdfError
from coordinator.cli import (
    block,
    completion,
    config,
    daemon,
    data,
    export,
    ingest,
    inspect,
    pull,
    repo,
    sharing,
    sql,
    transform,
    verify,
    workspace,
)

Handler = Callable[[argparse.Namespace], int]
COMMAND_MODULES = [
    block,
    data,
    workspace,
    inspect,
    ingest,
    pull,
    sharing,
    repo,
    transform,
    verify,
    sql,
    export,
    config,
    completion,
    daemon,
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="odf", description="Open Data Fabric coordinator")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logs (-vv: debug)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no progress bars (only results and errors)"
    )
    parser.add_argument(
        "--version",
        action=_Version,
        nargs=0,
        help="the package, the ODF spec and the embedded engine versions",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMAND_MODULES:
        module.register(subparsers)
    return parser


class _Version(argparse.Action):
    """``odf --version``: computed only when asked (the engine identity hashes its sources)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from importlib.metadata import PackageNotFoundError, version

        from common.odf import ODF_SPEC_VERSION
        from coordinator.engine.version import embedded_engine_version

        try:
            package = version("odf-py")
        except PackageNotFoundError:
            package = "unknown (not installed)"
        print(f"odf {package}")
        print(f"ODF spec {ODF_SPEC_VERSION}")
        print(f"embedded engine {embedded_engine_version()}")
        parser.exit()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    if "_ARGCOMPLETE" in os.environ:  # a shell asks for completions (odf completion SHELL)
        import argcomplete

        argcomplete.autocomplete(parser)
    args = parser.parse_args(argv)
    configure_logging(args.verbose)
    handler: Handler = args.handler
    try:
        return handler(args)
    except OdfError as e:
        if args.debug:
            traceback.print_exc()
        print(f"error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        if args.debug:
            traceback.print_exc()
        where = f"{e.filename}: " if e.filename else ""
        print(f"error: {where}{e.strerror or e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
