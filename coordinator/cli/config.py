"""``odf config list | get KEY | set KEY VALUE | unset KEY``: the workspace's ``.odf/config.yaml``.

``list`` and ``get`` show effective values (the defaults where the file is silent); ``set``
and ``unset`` rewrite the file, refusing any value the configuration could not hold (the same
checks as when it is read), and write it whole (rename).
"""

from __future__ import annotations

import argparse
from typing import Any

from common.odf.errors import OdfError, ValidationError
from coordinator.cli.arguments import command_group
from coordinator.cli.output import add_output_format_argument, render_rows
from coordinator.config import (
    SETTINGS,
    WorkspaceConfig,
    config_path,
    load_config,
    parse_config,
    setting,
    with_setting,
)
from coordinator.dataset.durable import write_atomic
from coordinator.workspace import Workspace


def register(subparsers: Any) -> None:
    commands = command_group(
        subparsers, "config", "the workspace's configuration (.odf/config.yaml)"
    )
    listing = commands.add_parser("list", help="every key and its effective value")
    add_output_format_argument(listing)
    listing.set_defaults(handler=cmd_list)
    get = commands.add_parser("get", help="the effective value of a key")
    get.add_argument("key", metavar="KEY", choices=list(SETTINGS), help="e.g. engine.provider")
    get.set_defaults(handler=cmd_get)
    put = commands.add_parser("set", help="set a key (checked before it is written)")
    put.add_argument("key", metavar="KEY", help="e.g. daemon.address")
    put.add_argument("value", metavar="VALUE", help="a YAML value: text, 10, true, {a: 10m}")
    put.set_defaults(handler=cmd_set)
    unset = commands.add_parser("unset", help="remove a key (its default applies again)")
    unset.add_argument("key", metavar="KEY")
    unset.set_defaults(handler=cmd_set, value=None)


def cmd_list(args: argparse.Namespace) -> int:
    config = load_config(Workspace.find().odf_dir)
    rows = [{"key": key, "value": setting(config, key)} for key in SETTINGS]
    render_rows(rows, ("key", "value"), args.output_format)
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    print(setting(load_config(Workspace.find().odf_dir), args.key))
    return 0


def cmd_set(args: argparse.Namespace) -> int:
    ws = Workspace.find()
    path = config_path(ws.odf_dir)
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    new_text = with_setting(text, args.key, args.value, source=str(path))
    if args.value is not None:
        _check_datasets_exist(ws, args.key, parse_config(new_text, source=str(path)))
    write_atomic(path, new_text.encode())
    return 0


def _check_datasets_exist(ws: Workspace, key: str, config: WorkspaceConfig) -> None:
    """A key that names datasets (``daemon.schedules``...) names datasets of the workspace."""
    for name in config.dataset_names().get(key, ()):
        try:
            ws.dataset_path(name)  # a name, or a did:odf id
        except OdfError as e:  # not found, or not a dataset reference at all
            reason = e.reason if isinstance(e, ValidationError) else str(e)
            raise ValidationError(reason, path=key) from None
