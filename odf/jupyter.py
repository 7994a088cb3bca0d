"""IPython and Jupyter magics: ``%load_ext odf.jupyter``.

- ``%odf connect PATH_OR_URL [TOKEN]``: the connection the other magics use (default: the
  workspace containing the working directory, made on first use); ``%odf use VAR``: the
  ``odf.Connection`` in variable ``VAR`` instead (its warm engines shared);
- ``%odf list``: the datasets, as a pandas DataFrame;
- ``%odf schema NAME``: a dataset's columns and types;
- ``%odf read NAME [AS_OF]``: a dataset's records (as of a block or time);
- ``%odf pull NAME...`` / ``%odf pull --all`` and ``%odf verify NAME...``: one line each;
- ``%odf close``;
- ``%%sql [VAR]``: the cell is a SQL query; its result is a pandas DataFrame, shown, or
  assigned to ``VAR`` when given. ``%odf connection`` is the connection as a Python object.

Errors show as one line (``UsageError``), not a traceback.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

from common.odf.errors import OdfError
from coordinator.app.pull_events import PullStarted
from odf.connection import Connection, connect

if TYPE_CHECKING:
    import pandas as pd
    from IPython.core.interactiveshell import InteractiveShell

_USAGE = (
    "%odf connect PATH_OR_URL [TOKEN] | use VAR | list | schema NAME | read NAME [AS_OF]"
    " | pull NAME... | pull --all | verify NAME... | connection | close"
)


def load_ipython_extension(ipython: InteractiveShell) -> None:
    """Called by ``%load_ext odf.jupyter``."""
    ipython.register_magics(OdfMagics)


@magics_class
class OdfMagics(Magics):
    """``%odf`` and ``%%sql`` (see the module doc)."""

    def __init__(self, shell: InteractiveShell) -> None:
        super().__init__(shell)
        self.connection: Connection | None = None

    @line_magic
    def odf(self, line: str) -> Any:
        words = shlex.split(line)
        if not words:
            raise UsageError(_USAGE)
        command, rest = words[0], words[1:]
        handler = self._commands().get(command)
        if handler is None:
            raise UsageError(f"unknown command {command!r}: {_USAGE}")
        try:
            return handler(rest)
        except OdfError as e:
            raise UsageError(str(e)) from None

    @cell_magic
    def sql(self, line: str, cell: str) -> pd.DataFrame | None:
        target = line.strip()
        if target and not target.isidentifier():
            raise UsageError(f"%%sql [VAR]: {target!r} is not a variable name")
        try:
            frame = self._connected().sql(cell).to_pandas()
        except OdfError as e:
            raise UsageError(str(e)) from None
        if target and self.shell is not None:
            self.shell.user_ns[target] = frame
            return None
        return frame

    # --- %odf commands ---------------------------------------------------------------------------

    def _commands(self) -> dict[str, Callable[[list[str]], Any]]:
        return {
            "connect": self._connect,
            "use": self._use,
            "list": self._list,
            "schema": self._schema,
            "read": self._read,
            "pull": self._pull,
            "verify": self._verify,
            "connection": lambda _: self._connected(),
            "close": self._close,
        }

    def _connect(self, words: list[str]) -> None:
        if not 1 <= len(words) <= 2:
            raise UsageError("%odf connect PATH_OR_URL [TOKEN]")
        self._close([])
        self.connection = connect(words[0], words[1] if len(words) > 1 else None)
        print(f"connected to {self.connection.target}")

    def _use(self, words: list[str]) -> None:
        (name,) = _arguments("use VAR", words, 1)
        found = self.shell.user_ns.get(name) if self.shell is not None else None
        if not isinstance(found, Connection):
            raise UsageError(f"%odf use: {name!r} is not an odf.Connection")
        self.connection = found

    def _list(self, words: list[str]) -> pd.DataFrame:
        import pandas as pd

        _no_arguments("list", words)
        rows = [
            {
                "name": d.name,
                "kind": d.kind,
                "records": d.records,
                "blocks": d.blocks,
                "updated": d.updated,
            }
            for d in self._connected().list_datasets()
        ]
        return pd.DataFrame(rows, columns=["name", "kind", "records", "blocks", "updated"])

    def _schema(self, words: list[str]) -> pd.DataFrame:
        import pandas as pd

        (name,) = _arguments("schema NAME", words, 1)
        schema = self._connected().schema(name)
        return pd.DataFrame({"column": schema.names, "type": [str(t) for t in schema.types]})

    def _read(self, words: list[str]) -> pd.DataFrame:
        if not 1 <= len(words) <= 2:
            raise UsageError("%odf read NAME [AS_OF]")
        as_of = words[1] if len(words) > 1 else None
        return self._connected().read(words[0], as_of=as_of).to_pandas()

    def _pull(self, words: list[str]) -> None:
        everything = words == ["--all"]
        if not words:
            raise UsageError("%odf pull NAME... | %odf pull --all")
        from coordinator.cli.pull import describe_pull_event  # the lines odf pull prints

        names = [] if everything else words
        for event in self._connected().pull(names, all_datasets=everything):
            if not isinstance(event, PullStarted):
                print(describe_pull_event(event))

    def _verify(self, words: list[str]) -> None:
        if not words:
            raise UsageError("%odf verify NAME...")
        for report in self._connected().verify(words):
            state = "ok" if report.ok else f"{len(report.problems)} problem(s)"
            print(f"{report.dataset}: {state} ({report.blocks} blocks)")
            for problem in report.problems:
                print(f"  {problem}")

    def _close(self, words: list[str]) -> None:
        _no_arguments("close", words)
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def _connected(self) -> Connection:
        if self.connection is None:
            self.connection = connect(".")
        return self.connection


def _no_arguments(command: str, words: list[str]) -> None:
    if words:
        raise UsageError(f"%odf {command} takes no arguments")


def _arguments(usage: str, words: list[str], count: int) -> list[str]:
    if len(words) != count:
        raise UsageError(f"%odf {usage}")
    return words
