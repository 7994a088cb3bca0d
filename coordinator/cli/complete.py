"""The fast path of shell completion: commands, dataset names, repository aliases, config keys.

Each TAB runs ``odf`` under argcomplete's protocol (``odf completion SHELL`` installs it):
``_ARGCOMPLETE`` set, the line in ``COMP_LINE`` up to ``COMP_POINT``, the answer written to
file descriptor 8 separated by ``_ARGCOMPLETE_IFS``. ``main`` calls ``answer`` before it
builds any parser: from ``GRAMMAR`` (the shape of every command: its positionals and the
options that take a value) it completes command and sub-command names, dataset names (the
workspace's dataset directories), repository aliases (``.odf/repos.json``) and config keys,
without importing the CLI's command modules, an engine or pyarrow. Anything else (options and
their values) is left to argcomplete over the whole parser. ``tests/unit/cli/test_complete``
checks ``GRAMMAR`` against that parser.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from coordinator.cli import GLOBAL_FLAGS

DATASET = "dataset"
PULLABLE = "dataset, or a repository alias and a slash (REPO/NAME: a clone)"
REPO = "repository alias"
REMOTE = "repository alias and a slash (REPO/NAME)"
KEY = "config key"
OTHER = ""


class Shape(NamedTuple):  # not a dataclass: ``dataclasses`` costs a TAB 10 ms to import
    """A command's positionals (what each one names; the last repeats when ``many``) and the
    options that take a value (whose value is not a positional)."""

    positionals: tuple[str, ...] = ()
    many: bool = False
    valued: frozenset[str] = frozenset()


def _shape(*positionals: str, many: bool = False, valued: str = "") -> Shape:
    return Shape(positionals, many, frozenset(valued.split()))


_FORMAT = "-o --output-format"
_TRANSFER = "--allow-origin --ca-file --max-object-size --parallel --smart-dialect --token-file"
_WAIT = "--wait-timeout"

GRAMMAR: dict[tuple[str, ...], Shape] = {
    ("block",): _shape(),
    ("block", "hash"): _shape(OTHER),
    ("block", "decode"): _shape(OTHER),
    ("data",): _shape(),
    ("data", "hash"): _shape(OTHER),
    ("init",): _shape(),
    ("new",): _shape(OTHER, valued="-t --template --output"),  # NAME: a dataset to be
    ("add",): _shape(OTHER, many=True),
    ("list",): _shape(valued=_FORMAT),
    ("ls",): _shape(valued=_FORMAT),
    ("delete",): _shape(DATASET, many=True, valued=_WAIT),
    ("rm",): _shape(DATASET, many=True, valued=_WAIT),
    ("reset",): _shape(DATASET, OTHER, valued=_WAIT),
    ("compact",): _shape(DATASET, valued=f"--max-records {_WAIT}"),
    ("rename",): _shape(DATASET, OTHER, valued=_WAIT),
    ("mv",): _shape(DATASET, OTHER, valued=_WAIT),
    ("log",): _shape(DATASET, valued=f"-n --limit {_FORMAT}"),
    ("tail",): _shape(DATASET, valued=f"-n --num-records -s --skip {_FORMAT}"),
    ("inspect",): _shape(),
    ("inspect", "schema"): _shape(DATASET, valued=_FORMAT),
    ("inspect", "lineage"): _shape(DATASET, valued=_FORMAT),
    ("inspect", "query"): _shape(DATASET, valued=_FORMAT),
    ("inspect", "transactions"): _shape(DATASET, valued=_FORMAT),
    ("inspect", "info"): _shape(DATASET, valued=_FORMAT),
    ("ingest",): _shape(
        DATASET, OTHER, many=True, valued=f"--event-time --input-format --source-name {_WAIT}"
    ),
    ("set-watermark",): _shape(DATASET, OTHER, valued=_WAIT),
    ("pull",): _shape(PULLABLE, many=True, valued=f"--as --system-time {_TRANSFER} {_WAIT}"),
    ("push",): _shape(DATASET, valued=f"--to {_TRANSFER}"),
    ("detach",): _shape(DATASET),
    ("trust",): _shape(DATASET),
    ("repo",): _shape(),
    ("repo", "add"): _shape(OTHER, OTHER, valued="--token-file"),
    ("repo", "list"): _shape(valued=_FORMAT),
    ("repo", "delete"): _shape(REPO),
    ("set-transform",): _shape(
        DATASET, valued=f"--engine --file --input --query --version {_WAIT}"
    ),
    ("verify",): _shape(DATASET, many=True, valued=_FORMAT),
    ("sql",): _shape(valued=f"--as-of -c --command -i --input -n --limit -f --script {_FORMAT}"),
    ("export",): _shape(DATASET, valued="--format --output --partition-size"),
    ("config",): _shape(),
    ("config", "list"): _shape(valued=_FORMAT),
    ("config", "get"): _shape(KEY),
    ("config", "set"): _shape(KEY, OTHER),
    ("config", "unset"): _shape(KEY),
    ("completion",): _shape(OTHER),
    ("serve",): _shape(
        valued="--address --http-address --flight-sql-address --log-format --tls-cert --tls-key"
    ),
    ("daemon",): _shape(),
    ("ui",): _shape(),
    ("daemon", "status"): _shape(),
    ("daemon", "stop"): _shape(),
    ("daemon", "logs"): _shape(valued="-n --lines"),
    ("daemon", "token"): _shape(),
    ("daemon", "token", "create"): _shape(valued="--scope --name"),
    ("daemon", "token", "list"): _shape(),
    ("daemon", "token", "revoke"): _shape(OTHER),
    ("engine",): _shape(),
    ("engine", "test"): _shape(
        valued="--address --capabilities --cases --dialect --exchange --filter --image"
        f" --report --workdir {_FORMAT}"
    ),
}
"""Every command (with its aliases) by its words; checked against the parser by a test (a few
are main's, newer than this branch: ``new``, ``inspect info``, ``daemon logs|token``)."""

CONFIG_KEYS = (
    "engine.provider",
    "engine.image",
    "engine.address",
    "engine.tokenFile",
    "engine.tlsCa",
    "engine.master",
    "engine.driverMemory",
    "engine.startTimeout",
    "engine.stagingDir",
    "transform.exchange",
    "transform.maxInputRecords",
    "transform.split.minRecords",
    "transform.split.slices",
    "transform.split.rehash",
    "daemon.address",
    "daemon.httpAddress",
    "daemon.flightSqlAddress",
    "daemon.flightSqlMaxCalls",
    "daemon.flightSqlCallTimeout",
    "daemon.flightSqlMaxRequestBytes",
    "daemon.flightSqlHandshakeTimeout",
    "daemon.maxParallel",
    "daemon.engineIdleTimeout",
    "daemon.warmUpSeconds",
    "daemon.followLineage",
    "daemon.requireTokenForReads",
    "daemon.httpHeaderTimeout",
    "daemon.httpBodyTimeout",
    "daemon.httpIdleTimeout",
    "daemon.httpMaxConnections",
    "daemon.httpMaxConnectionsPerClient",
    "daemon.schedules",
    "ingest.csvColumnsByPosition",
    "writers.waitTimeout",
    "verify.executorMinBytes",
)
"""``coordinator.config.SETTINGS``' keys (importing it costs a TAB 20 ms); tested equal."""

_VALUE_COMPLETIONS = {"--to": REMOTE}
"""Options whose value this path completes (the others' values are argcomplete's)."""


def candidates(words: Sequence[str], prefix: str, cwd: Path) -> list[str] | None:
    """What may complete ``prefix`` after ``words`` (the command line's words before it, the
    program's name left out); ``None`` when this path cannot tell (options, their values)."""
    if prefix.startswith("-"):
        return None
    path: tuple[str, ...] = ()
    positionals: list[str] = []
    after_option: str | None = None
    for word in words:
        if after_option is not None:
            after_option = None
            continue
        if word.startswith("-") and word != "-":
            if not path and word in GLOBAL_FLAGS:
                continue
            valued = GRAMMAR[path].valued if path else frozenset()
            if "=" not in word and word in valued:
                after_option = word
            elif word not in valued and not path:
                return None  # an option only the parser knows
            continue
        if not positionals and (*path, word) in GRAMMAR:
            path += (word,)
        elif not path:
            return None  # an unknown command: the parser says so
        else:
            positionals.append(word)
    if after_option is not None:
        kind = _VALUE_COMPLETIONS.get(after_option)
        return None if kind is None else _matching(kind, prefix, cwd)
    subcommands = _subcommands(path)
    if subcommands and not positionals:
        return [c for c in subcommands if c.startswith(prefix)]
    shape = GRAMMAR[path]
    if len(positionals) < len(shape.positionals):
        kind = shape.positionals[len(positionals)]
    elif shape.many and shape.positionals:
        kind = shape.positionals[-1]
    else:
        return None  # no positional left: options, which argcomplete knows
    return _matching(kind, prefix, cwd) if kind else None


def _subcommands(path: tuple[str, ...]) -> list[str]:
    return [p[-1] for p in GRAMMAR if len(p) == len(path) + 1 and p[: len(path)] == path]


def _matching(kind: str, prefix: str, cwd: Path) -> list[str]:
    if kind == KEY:
        return [k for k in CONFIG_KEYS if k.startswith(prefix)]
    odf_dir = _workspace_dir(cwd)
    if odf_dir is None:
        return []
    names = dataset_names(odf_dir) if kind in (DATASET, PULLABLE) else []
    if kind == REPO:
        names = repo_aliases(odf_dir)
    elif kind in (PULLABLE, REMOTE):
        names += [f"{alias}/" for alias in repo_aliases(odf_dir)]
    exact = [n for n in names if n.startswith(prefix)]
    if exact:
        return exact
    folded = prefix.lower()  # names are case-insensitive: ``com.ex`` finds ``Com.Example``
    return [n for n in names if n.lower().startswith(folded)]


WORKSPACE_DIR = ".odf"
"""``coordinator.workspace``'s directory (that module, with the model it imports, costs a TAB
20 ms): the same search (``Workspace.find``) and listing (``dataset_dirs``), tested equal."""


def _workspace_dir(cwd: Path) -> Path | None:
    here = cwd.resolve()
    for directory in (here, *here.parents):
        if (directory / WORKSPACE_DIR / "version").is_file():
            return directory / WORKSPACE_DIR
    return None


def dataset_names(odf_dir: Path) -> list[str]:
    """The workspace's datasets (their directories are named as they are), by name."""
    try:
        entries = [p for p in (odf_dir / "datasets").iterdir() if p.is_dir()]
    except OSError:
        return []
    return sorted((p.name for p in entries if not p.name.startswith(".")), key=str.lower)


REPOS_FILE = "repos.json"
"""``coordinator.sharing.repos``' file (not imported: it brings the transfer code)."""


def repo_aliases(odf_dir: Path) -> list[str]:
    """The repository aliases of ``odf repo add``; none when the file is absent or damaged
    (a TAB shows nothing rather than an error: ``odf repo list`` says what is wrong)."""
    try:
        doc = json.loads((odf_dir / REPOS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    repos = doc.get("repos") if isinstance(doc, dict) else None
    return sorted(repos, key=str.lower) if isinstance(repos, dict) else []


def answer(environ: Mapping[str, str] | None = None) -> bool:
    """Answer a completion request from the environment (argcomplete's protocol) when this
    path can; ``False`` when argcomplete must (nothing written then)."""
    env = os.environ if environ is None else environ
    try:
        line = env["COMP_LINE"]
        point = int(env.get("COMP_POINT", len(line)))
        skip = int(env.get("_ARGCOMPLETE", "1"))
    except (KeyError, ValueError):
        return False
    words, prefix, prequote = split_line(line[:point])
    if any(c in prefix for c in _WORDBREAKS):
        return False  # the shell splits it at that character: argcomplete knows how
    found = candidates(words[skip:], prefix, Path.cwd())
    if found is None:
        return False
    _write(found, env, prequote=prequote)
    return True


_WORDBREAKS = "\"'><=;|&(:"
"""bash's ``COMP_WORDBREAKS``: no dataset name, alias or key has them."""


def split_line(text: str) -> tuple[list[str], str, str]:
    """The words of a command line before the one being completed, that word (unquoted) and
    the quote it is open in (``'``, ``"`` or none), as the shell reads them. (argcomplete's
    ``split_line`` does the same; importing argcomplete costs a TAB 15 ms.)"""
    words: list[str] = []
    word, quote, started, escaped = "", "", False, False
    for ch in text:
        if escaped:
            word, escaped = word + ch, False
        elif ch == "\\" and quote != "'":
            escaped = started = True
        elif quote:
            if ch == quote:
                quote = ""
            else:
                word += ch
        elif ch in "'\"":
            quote, started = ch, True
        elif ch.isspace():
            if started:
                words.append(word)
            word, started = "", False
        else:
            word, started = word + ch, True
    return words, word, quote


_SPECIAL = "();<>|&!`$*?[]{} \t\n\"'\\"


def _write(found: list[str], env: Mapping[str, str], *, prequote: str) -> None:
    shell = env.get("_ARGCOMPLETE_SHELL", "bash")
    if shell not in ("fish", "tcsh") and not prequote:
        found = ["".join(f"\\{ch}" if ch in _SPECIAL else ch for ch in c) for c in found]
    spaced = env.get("_ARGCOMPLETE_SUPPRESS_SPACE") != "1" and not prequote
    if spaced and len(found) == 1 and found[0][-1:] not in ("=", "/", ":", ""):
        found = [found[0] + " "]  # as argcomplete: the shell adds no space itself
    if shell == "zsh":
        found = [c.replace(":", "\\:") + ":" for c in found]
    dfs = env.get("_ARGCOMPLETE_DFS")
    if dfs:
        found = [c + dfs for c in found]
    text = env.get("_ARGCOMPLETE_IFS", "\013").join(found)
    target = env.get("_ARGCOMPLETE_STDOUT_FILENAME")
    if target:
        Path(target).write_text(text, encoding="utf-8")
        return
    try:
        with os.fdopen(8, "w", encoding="utf-8") as out:
            out.write(text)
    except OSError:
        sys.stdout.write(text)
