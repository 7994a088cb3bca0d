"""``odf repo add NAME URL | list | delete NAME``: repository aliases for ``REPO/NAME``."""

from __future__ import annotations

import argparse
from typing import Any

from coordinator.cli.arguments import command_group
from coordinator.cli.output import add_output_format_argument, render_rows
from coordinator.sharing.repos import RepoRegistry
from coordinator.workspace import Workspace


def register(subparsers: Any) -> None:
    commands = command_group(
        subparsers, "repo", "repositories that REPO/NAME references point into"
    )
    add = commands.add_parser("add", help="a repository alias for a URL")
    add.add_argument("name", metavar="NAME", help="the alias (a hostname-like name)")
    add.add_argument(
        "url", metavar="URL", help="file:///dir, http(s)://host/path, odf+http(s)://host:port"
    )
    add.add_argument(
        "--token-file",
        metavar="FILE",
        help="the repository's token (a daemon's, a kamu node's access token), kept in"
        " .odf/repos.json (mode 0600) and sent to it unless --token-file/ODF_TOKEN says otherwise",
    )
    add.set_defaults(handler=cmd_add)
    listing = commands.add_parser("list", help="every repository alias")
    add_output_format_argument(listing)
    listing.set_defaults(handler=cmd_list)
    delete = commands.add_parser("delete", help="remove a repository alias")
    delete.add_argument("name", metavar="NAME")
    delete.set_defaults(handler=cmd_delete)


def cmd_add(args: argparse.Namespace) -> int:
    from coordinator.cli.sharing import push_token

    token = push_token(args.token_file) if args.token_file is not None else None
    name, url = RepoRegistry(Workspace.find()).add(args.name, args.url, token)
    print(f"repository {name}: {url}" + (" (with its token)" if token else ""))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    repos = RepoRegistry(Workspace.find()).all()
    rows = [{"name": str(name), "url": url.url} for name, url in sorted(repos.items())]
    render_rows(rows, ("name", "url"), args.output_format)
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    RepoRegistry(Workspace.find()).delete(args.name)
    print(f"repository {args.name} deleted")
    return 0
