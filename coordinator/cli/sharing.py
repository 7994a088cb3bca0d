"""``odf push`` and the remote part of ``odf pull``: datasets to and from repositories.

``odf pull URL|REPO/NAME [--as NAME]`` clones or updates; ``odf pull NAME`` of a dataset
pulled from a remote updates it from there (``--all`` too): ``remote_pulls`` runs those and
hands the rest of the names to the ordinary pull. ``odf push NAME [--to URL|REPO/NAME]
[--force]``. One line per dataset; rich progress bars (objects, bytes) on a terminal.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.humanize import plural
from common.odf.errors import OdfError, ValidationError
from coordinator.cli.connect import writer_locks
from coordinator.cli.progress import terminal_progress
from coordinator.cli.terminal_text import visible
from coordinator.dataset import Dataset
from coordinator.sharing.limits import DEFAULT_MAX_OBJECT_BYTES, DEFAULT_PARALLEL, Limits
from coordinator.sharing.remote_refs import looks_remote
from coordinator.sharing.repos import read_remotes
from coordinator.sharing.trust import LocalDaemon, Trust
from coordinator.workspace import Workspace

if TYPE_CHECKING:
    from coordinator.app.sharing import Transferred
    from coordinator.sharing.transfer import Options


TOKEN_ENV = "ODF_TOKEN"


def add_transfer_arguments(p: Any) -> None:
    p.add_argument(
        "--parallel",
        type=int,
        default=DEFAULT_PARALLEL,
        metavar="N",
        help=f"objects transferred at once (default {DEFAULT_PARALLEL})",
    )
    p.add_argument(
        "--max-object-size",
        type=int,
        default=DEFAULT_MAX_OBJECT_BYTES,
        metavar="BYTES",
        help="refuse a data file or checkpoint larger than this",
    )
    p.add_argument(
        "--token-file",
        metavar="FILE",
        help="the server's token, for pushes to odf+http(s):// and reads from a daemon that"
        " requires it (default: $ODF_TOKEN; this workspace's own daemon: its token)",
    )
    p.add_argument(
        "--ca-file",
        metavar="PEM",
        help="the certificate(s) to check https:// remotes with, e.g. a daemon's self-signed"
        " one (default: the system's; this workspace's own daemon: its certificate)",
    )
    p.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="URL",
        help="an origin (https://host[:port]) a smart server may send download URLs to,"
        " besides its own (repeatable; default: none)",
    )
    p.add_argument(
        "--smart-dialect",
        choices=("auto", "reference", "spec"),
        default="auto",
        help="the Smart Transfer Protocol's dialect for odf+http(s):// (reference: kamu-cli's"
        " and kamu-node's; spec: the AsyncAPI file's; default auto: the reference's, or the"
        " spec's when the server answers in it; -v says which)",
    )


def _origin(text: str) -> str:
    from urllib.parse import urlsplit

    from coordinator.sharing.limits import origin

    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
        raise ValidationError(
            f"{text!r} is not an origin (https://host[:port])", path="--allow-origin"
        )
    return origin(text)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "push", help="push a dataset to a repository (file://) or an odf serve (odf+http://)"
    )
    p.add_argument("name", metavar="NAME", help="the local dataset")
    p.add_argument(
        "--to",
        metavar="URL|REPO/NAME",
        help="the target (default: where this dataset was pushed last)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="overwrite a target whose chain diverged or went ahead (its extra blocks are lost)",
    )
    add_transfer_arguments(p)
    p.set_defaults(handler=cmd_push)

    p = subparsers.add_parser(
        "detach", help="make a clone a local dataset (its source and transform may then run here)"
    )
    p.add_argument("name", metavar="NAME", help="the clone")
    p.set_defaults(handler=cmd_detach)

    p = subparsers.add_parser(
        "trust", help="review and trust the commands a detached clone's polling source runs"
    )
    p.add_argument("name", metavar="NAME", help="the dataset")
    p.add_argument("--yes", action="store_true", help="trust without asking")
    p.set_defaults(handler=cmd_trust)


def cmd_detach(args: argparse.Namespace) -> int:
    from coordinator.app.sharing import Sharing

    remote = Sharing(Workspace.find()).detach(args.name)
    print(
        visible(
            f"{args.name}: detached from {remote}; it is a local dataset now. Commands its"
            f" polling source runs must be trusted first: odf trust {args.name}"
        )
    )
    return 0


def cmd_trust(args: argparse.Namespace) -> int:
    from coordinator.app.sharing import Sharing

    sharing = Sharing(Workspace.find())
    commands = sharing.commands_to_trust(args.name)
    if not commands:
        print(f"{args.name}: its polling source runs no command here; nothing to trust")
        return 0
    print(f"{args.name}: its polling source runs these commands on this machine:")
    for line in commands:
        print(f"  {visible(line)}")
    if not args.yes:
        if not sys.stdin.isatty():
            raise ValidationError("not trusted: confirm on a terminal, or give --yes")
        if input("trust them? [y/N] ").strip().lower() not in ("y", "yes"):
            print("not trusted")
            return 1
    sharing.trust(args.name, commands)
    print(f"{args.name}: trusted {plural(len(commands), 'command')}")
    return 0


def _options(args: argparse.Namespace, progress: Any, *, force: bool = False) -> Options:
    from coordinator.sharing.transfer import Options

    if args.parallel < 1:
        raise ValidationError("must be at least 1", path="--parallel")
    if args.max_object_size < 1:
        raise ValidationError("must be at least 1", path="--max-object-size")
    return Options(
        limits=Limits(
            max_object_bytes=args.max_object_size,
            download_origins=tuple(_origin(o) for o in args.allow_origin),
        ),
        parallel=args.parallel,
        progress=progress,
        trust=_trust(args),
        force=force,
        dialect=args.smart_dialect,
    )


def _trust(args: argparse.Namespace) -> Trust:
    """``--ca-file`` and the token of ``--token-file`` (or ``ODF_TOKEN``), with this
    workspace's daemon (when one runs) for its own address."""
    from coordinator.daemon.rundir import RunDir

    ca_file = None
    if args.ca_file is not None:
        ca_file = Path(args.ca_file)
        if not ca_file.is_file():
            raise ValidationError(f"{args.ca_file}: no such file", path="--ca-file")
    rundir = RunDir(Workspace.find().odf_dir)
    info = rundir.read_info()
    local = None
    if info is not None:
        cert = Path(info.tls_cert) if info.tls_cert else None
        local = LocalDaemon(info.http_address, cert, rundir.read_token())
    return Trust(ca_file, push_token(args.token_file), local)


def cmd_push(args: argparse.Namespace) -> int:
    from coordinator.app.sharing import Sharing  # the transports: only for a transfer

    sharing = Sharing(Workspace.find())
    with terminal_progress(args) as progress:
        options = _options(args, progress, force=args.force)
        done = sharing.push(args.name, options, to=args.to, token=options.trust.token)
    print(describe(done, "pushed to"))
    return 0


MAX_TOKEN_BYTES = 4096


def push_token(token_file: str | None) -> str | None:
    """The token of ``--token-file``, else of ``ODF_TOKEN``; ``None`` when neither is given."""
    if token_file is None:
        text = os.environ.get(TOKEN_ENV, "").strip()
        where = TOKEN_ENV
    else:
        try:
            with open(token_file, "rb") as f:
                raw = f.read(MAX_TOKEN_BYTES + 1)
        except OSError as e:
            raise ValidationError(f"{token_file}: {e.strerror}", path="--token-file") from None
        if len(raw) > MAX_TOKEN_BYTES:
            raise ValidationError(f"{token_file}: larger than a token", path="--token-file")
        text = raw.decode("ascii", "replace").strip()
        where = token_file
        if not text:
            raise ValidationError(f"{token_file}: empty", path="--token-file")
    if text and not (text.isascii() and text.isprintable() and " " not in text):
        raise ValidationError(f"{where}: not a token (printable ASCII without spaces)")
    return text or None


def remote_pulls(args: argparse.Namespace) -> tuple[list[str], bool, int]:
    """Run the remote pulls among ``odf pull``'s arguments; returns the names left for the
    ordinary pull, whether it is still to pull all datasets, and the number of failures."""
    names: list[str] = args.names
    if args.as_name is not None and (len(names) != 1 or not looks_remote(names[0])):
        raise ValidationError("needs exactly one URL or REPO/NAME to pull", path="--as")
    remote = [n for n in names if looks_remote(n)]
    local = [n for n in names if not looks_remote(n)]
    ws = Workspace.find()
    datasets = ws.list_datasets() if args.all else [d for n in local if (d := _open(ws, n))]
    cloned = [d.alias for d in datasets if _cloned(d)]
    if not remote and not cloned:
        return local, args.all, 0
    from coordinator.app.sharing import Sharing  # the transports: only for a transfer

    sharing = Sharing(ws, writer_locks(args, ws))
    failures = 0
    with_inputs = getattr(args, "with_inputs", False) or getattr(args, "recursive", False)
    with terminal_progress(args) as progress:
        options = _options(args, progress)
        jobs = [(n, True) for n in remote] + [(n, False) for n in cloned]
        for name, is_remote in jobs:
            try:
                if is_remote:
                    done = sharing.pull_remote(name, options, as_name=args.as_name)
                else:
                    done = sharing.pull_cloned(name, options)
                print(describe(done, "cloned from" if done.cloned else "pulled from"))
                if with_inputs:
                    for found in sharing.pull_inputs(done.dataset, options):
                        print(describe(found, "cloned from" if found.cloned else "pulled from"))
            except OdfError as e:
                if args.fail_fast:
                    raise
                text = str(e) if str(e).startswith(name) else f"{name}: {e}"  # the URL once
                print(f"error: {visible(text)}", file=sys.stderr)
                failures += 1
                continue
    rest = [d.alias for d in datasets] if args.all else local
    return [n for n in rest if _key(ws, n) not in {c.lower() for c in cloned}], False, failures


def _open(ws: Workspace, name: str) -> Dataset | None:
    try:
        return ws.open_dataset(name)
    except OdfError:  # the ordinary pull reports it
        return None


def _key(ws: Workspace, name: str) -> str:
    ds = _open(ws, name)
    return (ds.alias if ds is not None else name).lower()


def _cloned(ds: Dataset) -> bool:
    try:
        return read_remotes(ds.layout).pull is not None
    except OdfError:
        return False


def describe(done: Transferred, verb: str) -> str:
    from coordinator.sharing.transfer import Outcome

    r = done.result
    if r.outcome is Outcome.UP_TO_DATE:
        return f"{done.dataset}: up to date with {done.remote} (head {r.new_head})"
    if r.outcome is Outcome.RECEIVER_AHEAD:
        return f"{done.dataset}: {done.remote} is behind (nothing to pull; head {r.old_head})"
    return (
        f"{done.dataset}: {verb} {done.remote}: {plural(r.blocks, 'block')},"
        f" {plural(r.objects, 'object')}"
        f" ({r.bytes:,} bytes), head {r.new_head}"
    )
