"""structlog set-up shared by the CLI and the engine: structured, quiet by default."""

from __future__ import annotations

import logging
import sys

import structlog


def _stderr_logger(*_args: object) -> structlog.PrintLogger:
    # Resolve sys.stderr at each use: it may be replaced (test capture, daemonization).
    return structlog.PrintLogger(file=sys.stderr)


def configure_logging(verbosity: int = 0, *, json: bool = False) -> None:
    """WARNING by default, INFO with ``-v``, DEBUG with ``-vv``; logs go to stderr."""
    level = {0: logging.WARNING, 1: logging.INFO}.get(verbosity, logging.DEBUG)
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if json
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )
