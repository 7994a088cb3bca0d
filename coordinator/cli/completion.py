"""``odf completion bash|zsh|fish``: the shell code that completes ``odf`` commands and options.

For example ``eval "$(odf completion bash)"`` in ``~/.bashrc``, or
``odf completion fish > ~/.config/fish/completions/odf.fish``. The completions come from the
CLI's own argument parser (argcomplete), so they always match the installed ``odf``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

SHELLS = ("bash", "zsh", "fish")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("completion", help="shell completion code (bash, zsh, fish)")
    p.add_argument("shell", choices=SHELLS, metavar="SHELL", help=", ".join(SHELLS))
    p.set_defaults(handler=cmd_completion)


def cmd_completion(args: argparse.Namespace) -> int:
    from argcomplete.shell_integration import shellcode

    sys.stdout.write(shellcode(["odf"], shell=args.shell))
    return 0
