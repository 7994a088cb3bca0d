"""Placeholder until this command group lands."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    del subparsers


def _unused(args: argparse.Namespace) -> int:
    return 0
