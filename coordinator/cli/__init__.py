"""The ``odf`` command line.

Each command group lives in its own module with a ``register(subparsers)`` function that
adds its sub-commands; a command's handler takes the parsed arguments and returns an exit
code. Errors of this project (``OdfError``) become one line on stderr and exit code 1.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from types import ModuleType

Handler = Callable[[argparse.Namespace], int]

COMMANDS: dict[str, tuple[str, ...]] = {
    "block": ("block",),
    "data": ("data",),
    "workspace": ("init", "add", "list", "ls", "delete", "rm", "reset", "compact", "rename", "mv"),
    "new": ("new",),
    "inspect": ("log", "tail", "inspect"),
    "ingest": ("ingest", "set-watermark"),
    "pull": ("pull",),
    "sharing": ("push", "detach", "trust"),
    "repo": ("repo",),
    "transform": ("set-transform",),
    "verify": ("verify",),
    "sql": ("sql",),
    "export": ("export",),
    "config": ("config",),
    "completion": ("completion",),
    "daemon": ("serve", "daemon"),
    "ui": ("ui",),
    "engine_test": ("engine",),
}
"""Each command module (``coordinator.cli.<module>``, in help order) and the commands (with
aliases) its ``register`` adds. Only the module of the command being run is imported: a
command imports only what it uses (``tests/unit/cli`` checks this table against the modules)."""

GLOBAL_FLAGS = frozenset({"-v", "-vv", "-vvv", "--verbose", "--debug", "-q", "--quiet"})
"""The options of ``odf`` itself, allowed anywhere on the command line."""


def command_modules(argv: Sequence[str] | None = None) -> list[ModuleType]:
    """The command modules to register for ``argv``: the one its command belongs to, or all
    (no command yet, help, an unknown command, shell completion)."""
    names = list(COMMANDS)
    if argv is not None and "_ARGCOMPLETE" not in os.environ:
        command = _command_of(argv)
        if command == "--version":
            return []  # prints and exits while parsing, before a command is required
        owner = [m for m, commands in COMMANDS.items() if command in commands]
        names = owner or names
    return [importlib.import_module(f"coordinator.cli.{name}") for name in names]


def _command_of(argv: Sequence[str]) -> str | None:
    for arg in argv:
        if arg not in GLOBAL_FLAGS:
            return arg  # the command, or an option only the full parser can report
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``odf`` parser; with ``argv``, only its command's module is registered."""
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
    for module in command_modules(argv):
        module.register(subparsers)
    return parser


class _Version(argparse.Action):
    """``odf --version``: computed only when asked (the engine identity hashes its sources)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from common.odf import ODF_SPEC_VERSION
        from coordinator.engine.installed import installed_version
        from coordinator.engine.version import build_version, image_version

        package = installed_version("odf-py") or "unknown (not installed)"
        print(f"odf {package}")
        print(f"ODF spec {ODF_SPEC_VERSION}")
        image = image_version()
        print(f"embedded engine {build_version()}" + (f" = {image}" if image else ""))
        parser.exit()


def hoist_global_flags(argv: Sequence[str]) -> list[str]:
    """``argv`` with the global flags moved before the command, so that ``odf pull X -q``
    means ``odf -q pull X`` (no command has options of these names); ``--`` ends the search."""
    end = argv.index("--") if "--" in argv else len(argv)
    flags = [a for a in argv[:end] if a in GLOBAL_FLAGS]
    rest = [a for a in argv[:end] if a not in GLOBAL_FLAGS]
    return [*flags, *rest, *argv[end:]]


def unknown_command(argv: Sequence[str]) -> str | None:
    """The error line for a mistyped command (with the closest commands), else ``None``."""
    command = _command_of(argv)
    known = [c for commands in COMMANDS.values() for c in commands]
    if command is None or command.startswith("-") or command in known:
        return None
    import difflib

    close = difflib.get_close_matches(command, known, n=2, cutoff=0.6)
    hint = "; did you mean " + " or ".join(repr(c) for c in close) + "?" if close else ""
    from coordinator.cli.terminal_text import visible

    return f"odf: error: unknown command {visible(repr(command))}{hint} (see odf --help)"


def main(argv: Sequence[str] | None = None) -> int:
    if "_ARGCOMPLETE" in os.environ:  # a TAB: names and keys without the whole CLI
        from coordinator.cli.complete import answer

        if answer():
            return 0
    argv = hoist_global_flags(sys.argv[1:] if argv is None else argv)
    if "_ARGCOMPLETE" not in os.environ and (line := unknown_command(argv)) is not None:
        print(line, file=sys.stderr)
        return 2
    parser = build_parser(argv)
    if "_ARGCOMPLETE" in os.environ:  # a shell asks for completions (odf completion SHELL)
        import argcomplete

        argcomplete.autocomplete(parser)
    args = parser.parse_args(argv)
    from common.logs import configure_logging
    from common.odf.errors import OdfError
    from coordinator.cli.terminal_text import visible

    configure_logging(args.verbose)
    handler: Handler = args.handler
    try:
        return handler(args)
    except OdfError as e:
        if args.debug:
            import traceback

            traceback.print_exc()
        print(f"error: {visible(str(e))}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # the reader went away (``odf export --output - | head``)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nothing more to flush at exit
        return 0
    except OSError as e:
        if args.debug:
            import traceback

            traceback.print_exc()
        where = f"{e.filename}: " if e.filename else ""
        print(f"error: {visible(f'{where}{e.strerror or e}')}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


_end_quickly = False


def end_quickly() -> None:
    """Let this process end without the interpreter's teardown once the command returns and
    its output is flushed (``run``): for a command whose work is all done by then (a thin
    client's query), that teardown (unloading pyarrow and the rest) is ~30 ms of its time."""
    global _end_quickly
    _end_quickly = True


def run() -> None:
    """The ``odf`` program: ``main`` as a process, ended as the command asked."""
    code = main()
    if _end_quickly:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except OSError:  # the reader went away: the ordinary exit reports it
            sys.exit(code)
        logging = sys.modules.get("logging")
        if logging is not None:  # its handlers flushed, as at an ordinary exit
            logging.shutdown()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
