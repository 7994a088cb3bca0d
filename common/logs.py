"""structlog set-up shared by the CLI and the engine: structured, quiet by default.

structlog (with its console renderer and rich) costs more to import than a short command
takes to run, so it is imported only when something is really logged: ``get_logger`` returns
a stand-in that drops calls below the configured level without importing anything, and
``configure_logging`` applies the configuration as soon as structlog is imported, by whoever
imports it (a module of ours on a first log call that passes the level, or a library).
"""

from __future__ import annotations

import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import importlib.abc
    from pathlib import Path

    import structlog

# The standard library's level numbers (``logging.DEBUG`` ...), without importing ``logging``
# and ``importlib.abc`` here: together they cost a third of a short command's start-up.
DEBUG, INFO, WARNING, ERROR, CRITICAL = 10, 20, 30, 40, 50

_LEVELS = {
    "debug": DEBUG,
    "info": INFO,
    "msg": INFO,
    "warning": WARNING,
    "warn": WARNING,
    "error": ERROR,
    "exception": ERROR,
    "critical": CRITICAL,
    "fatal": CRITICAL,
}
_level = WARNING
"""The level ``configure_logging`` set (before it is called: structlog's own default)."""
_settings: tuple[int, bool] | None = None
_sink: LogFile | None = None


def _stderr_logger(*_args: object) -> structlog.PrintLogger:
    import structlog

    # Resolve sys.stderr at each use: it may be replaced (test capture, daemonization).
    return structlog.PrintLogger(file=sys.stderr)


class LogFile:
    """A copy of every log entry as one JSON line in ``path`` (a daemon's log, read back by
    ``odf daemon logs``). Bounded: past ``max_bytes`` the file is renamed to ``path.1``
    (replacing the older one) and a new one begun."""

    def __init__(self, path: Path, max_bytes: int = 16 << 20) -> None:
        import threading

        self.path, self.max_bytes = path, max_bytes
        self._lock = threading.Lock()

    def __call__(self, _logger: object, _method: str, event: dict[str, Any]) -> dict[str, Any]:
        import json

        line = json.dumps(event, default=str, ensure_ascii=True) + "\n"
        with self._lock:
            try:
                if self.path.exists() and self.path.stat().st_size + len(line) > self.max_bytes:
                    self.path.replace(self.path.with_name(self.path.name + ".1"))
                with open(self.path, "a", encoding="ascii") as out:
                    out.write(line)
            except OSError:  # a full disk must not stop the daemon: stderr still has it
                pass
        return event


def configure_logging(
    verbosity: int = 0, *, json: bool = False, floor: int = WARNING, file: LogFile | None = None
) -> None:
    """WARNING by default (or ``floor``), INFO with ``-v``, DEBUG with ``-vv``; logs go to
    stderr, and to ``file`` as JSON lines when given."""
    global _level, _settings, _sink
    _level = min(floor, {0: WARNING, 1: INFO}.get(verbosity, DEBUG))
    _settings = (_level, json)
    _sink = file
    if "structlog" in sys.modules:
        _apply(sys.modules["structlog"])
    elif not any(isinstance(f, _ConfigureOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _ConfigureOnImport())


def _apply(structlog: ModuleType) -> None:
    if _settings is None:
        return
    level, json = _settings
    renderer = (
        structlog.processors.JSONRenderer()
        if json
        else structlog.dev.ConsoleRenderer(
            colors=sys.stderr.isatty(), exception_formatter=structlog.dev.plain_traceback
        )
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            *([_sink] if _sink is not None else []),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )


class _ConfigureOnImport:  # an importlib.abc.MetaPathFinder
    """Configures structlog right after its first import, whoever imports it."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "structlog":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = cast("importlib.abc.Loader", _ConfiguringLoader(spec.loader))
        return spec


class _ConfiguringLoader:  # an importlib.abc.Loader
    def __init__(self, inner: importlib.abc.Loader) -> None:
        self.inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        # structlog renders exceptions with rich when it can import it, and importing rich's
        # traceback and pretty-printer (with attrs and pygments) costs more than a short
        # command's work (70 ms of a 0.4 s CLI start). Unless rich is already loaded, it is
        # hidden while structlog loads: exceptions then render as plain tracebacks.
        hide_rich = "rich" not in sys.modules
        if hide_rich:
            sys.modules["rich"] = None  # type: ignore[assignment]  # `import rich` fails
        try:
            self.inner.exec_module(module)
        finally:
            if hide_rich:  # `None` made any import of rich fail meanwhile: it is still ours
                sys.modules.pop("rich", None)
        _apply(module)


def _drop(*_args: object, **_kwargs: object) -> None:
    return None


class LazyLogger:
    """A structlog logger imported on its first call at or above the configured level."""

    __slots__ = ("_logger", "_name")

    def __init__(self, name: str | None) -> None:
        self._name = name
        self._logger: Any = None

    def __getattr__(self, method: str) -> Callable[..., Any]:
        if _LEVELS.get(method, CRITICAL) < _level:
            return _drop
        if self._logger is None:
            import structlog

            self._logger = structlog.get_logger(self._name)
        return getattr(self._logger, method)  # type: ignore[no-any-return]


def get_logger(name: str | None = None) -> Any:
    """A logger for ``name`` (a module's ``__name__``) that costs nothing until it logs."""
    return LazyLogger(name)
