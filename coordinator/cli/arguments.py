"""Argparse pieces that many commands share: a command with subcommands, the dataset-name
argument, an on/off flag, whole-number option types, a time argument."""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any

from common.odf.errors import ValidationError


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


def positive_int(text: str) -> int:
    """An option's whole number, at least 1 (an argparse ``type``)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """An option's whole number, 0 or more (an argparse ``type``)."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return value


def parse_time(text: str, where: str) -> datetime:
    """``text`` as an RFC 3339 time (UTC); else a one-line error naming ``where`` (the
    argument or option)."""
    from coordinator.ingest.source_state import parse_rfc3339

    try:
        return parse_rfc3339(text)
    except (ValueError, OverflowError):  # OverflowError: before year 1 once in UTC
        raise ValidationError(
            f"{text!r} is not an RFC 3339 time in years 1 to 9999 (e.g. 2020-01-01T00:00:00Z)",
            path=where,
        ) from None


def optional_time(text: str | None, where: str) -> datetime | None:
    """``parse_time`` of an option's value; None when the option is not given."""
    return parse_time(text, where) if text is not None else None
