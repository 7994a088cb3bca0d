"""Prepare steps: byte-level transformations of a fetched file before it is read.

- ``Decompress Gzip``: every member of the gzip stream (the reference decodes only the
  first member, silently dropping the rest of concatenated files).
- ``Decompress Zip``: the member named by ``subPath`` (exact name, else a glob matching
  exactly one member, as the spec allows), or the first file member without one.
- ``Pipe``: ``command[0]`` run with ``command[1:]`` as arguments (no shell), the file on
  stdin and the output from stdout; a non-zero exit fails the ingest.

Steps are chained: each reads the previous step's output file and writes a new one.
"""

from __future__ import annotations

import fnmatch
import gzip
import shutil
import subprocess
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path

from common.odf.fragments import CompressionFormat, PrepStep, PrepStepDecompress, PrepStepPipe
from coordinator.ingest.errors import ProcessError, ReadError

CHUNK_BYTES = 1 << 20


def prepare(steps: Sequence[PrepStep], path: Path, work_dir: Path, *, name: str) -> Path:
    """The file to read after all ``steps`` applied to ``path`` (``path`` itself if none)."""
    current = path
    for i, step in enumerate(steps):
        output = work_dir / f"prepared-{i}.bin"
        where = f"{name} (prepare[{i}])"
        match step:
            case PrepStepDecompress(format=CompressionFormat.GZIP):
                _gunzip(current, output, where)
            case PrepStepDecompress(format=CompressionFormat.ZIP):
                _unzip(current, output, step.sub_path, where)
            case PrepStepPipe():
                _pipe(step.command, current, output, work_dir, where)
            case PrepStepDecompress():
                raise ReadError(f"unsupported compression {step.format}", path=where)
        if current != path:
            current.unlink(missing_ok=True)
        current = output
    return current


def _gunzip(source: Path, output: Path, where: str) -> None:
    try:
        with gzip.open(source, "rb") as src, open(output, "wb") as out:
            shutil.copyfileobj(src, out, CHUNK_BYTES)
    except (OSError, EOFError, zlib.error) as e:
        raise ReadError(f"not a valid gzip file: {e}", path=where) from None


def _unzip(source: Path, output: Path, sub_path: str | None, where: str) -> None:
    try:
        archive = zipfile.ZipFile(source)
    except zipfile.BadZipFile as e:
        raise ReadError(f"not a valid zip file: {e}", path=where) from None
    with archive:
        member = _zip_member(archive, sub_path, where)
        try:
            with archive.open(member) as src, open(output, "wb") as out:
                shutil.copyfileobj(src, out, CHUNK_BYTES)
        except (zipfile.BadZipFile, OSError, zlib.error) as e:
            raise ReadError(f"cannot extract {member!r}: {e}", path=where) from None


def _zip_member(archive: zipfile.ZipFile, sub_path: str | None, where: str) -> str:
    files = [info.filename for info in archive.infolist() if not info.is_dir()]
    if sub_path is None:
        if not files:
            raise ReadError("the zip archive holds no file", path=where)
        return files[0]
    if sub_path in files:
        return sub_path
    matches = [f for f in files if fnmatch.fnmatchcase(f, sub_path)]
    if len(matches) != 1:
        found = ", ".join(matches) if matches else "none"
        raise ReadError(
            f"subPath {sub_path!r} must match exactly one member of the zip archive,"
            f" matched: {found}",
            path=where,
        )
    return matches[0]


def _pipe(command: Sequence[str], source: Path, output: Path, work_dir: Path, where: str) -> None:
    if not command:
        raise ProcessError(f"{where}: Pipe has an empty command")
    stderr_path = work_dir / "prepare.err.txt"
    try:
        with (
            open(source, "rb") as stdin,
            open(output, "wb") as stdout,
            open(stderr_path, "wb") as stderr,
        ):
            result = subprocess.run(
                list(command), stdin=stdin, stdout=stdout, stderr=stderr, check=False
            )
    except OSError as e:
        raise ProcessError(f"{where}: cannot run {command[0]!r}: {e.strerror or e}") from None
    if result.returncode != 0:
        lines = stderr_path.read_text(errors="replace").strip().splitlines()
        tail = f": {lines[-1]}" if lines else ""
        raise ProcessError(
            f"{where}: command {' '.join(command)!r} exited with code {result.returncode}{tail}"
        )
