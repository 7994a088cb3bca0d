"""Argparse pieces that many commands share: a command with subcommands, the dataset-name
argument, an on/off flag."""

from __future__ import annotations

from typing import Any


def command_group(
    subparsers: Any, name: str, help: str, *, dest: str = "", metavar: str = "COMMAND", **kw: Any
) -> Any:
    """Add command ``name`` whose subcommands are required; the subcommands' parsers action
    (its ``add_parser`` adds one). ``dest`` defaults to ``<name>_command``."""
    parser = subparsers.add_parser(name, help=help, **kw)
    return parser.add_subparsers(dest=dest or f"{name}_command", metavar=metavar, required=True)


def add_name_argument(parser: Any, help: str) -> None:
    """The positional ``NAME`` of the dataset (or alias) a command works on."""
    parser.add_argument("name", metavar="NAME", help=help)


def add_flag(parser: Any, *flags: str, help: str) -> None:
    """An on/off option (``store_true``)."""
    parser.add_argument(*flags, action="store_true", help=help)
