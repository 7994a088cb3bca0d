"""The integrity check with the data files hashed by an engine (``engine_hashes.py``): the
engine here answers HashDataFiles in-process with the executors' own per-file code
(``engine_spark.file_hashes``, without Spark; the Spark job is tested in
``tests/integration/engine/test_hash_data_files.py``). The report is the coordinator path's,
word for word, and whatever the engine cannot or does not answer properly is hashed here."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from common.odf import engine_protocol as ep
from coordinator.engine.errors import EngineUnimplementedError
from coordinator.transform.runner import workspace_resolver
from coordinator.verify.engine_hashes import EngineHashes, hashes_on_executors
from coordinator.verify.report import DatasetReport
from coordinator.verify.verifier import Verifier
from engine_spark.file_hashes import _hash_one
from tests.unit.verify.pipeline import Pipeline, build_pipeline
from tests.unit.verify.test_integrity import data_file, flip_byte


class InProcessEngine:
    """HashDataFiles answered by the executors' per-file code; ``spoil`` changes the answer."""

    description = "in-process engine"

    def __init__(self, spoil=lambda a: a, implemented: bool = True) -> None:
        self.spoil = spoil
        self.implemented = implemented
        self.calls: list[int] = []

    def hash_data_files(self, request: ep.HashDataFilesRequest) -> ep.HashDataFilesResponseSuccess:
        self.calls.append(len(request.data_paths))
        if not self.implemented:
            raise EngineUnimplementedError("in-process engine does not implement HashDataFiles")
        files = tuple(_hash_one(p, "executor 0 on here") for p in request.data_paths)
        return self.spoil(ep.HashDataFilesResponseSuccess(files=files, tasks=len(files)))


@pytest.fixture
def p(tmp_path: Path) -> Pipeline:
    return build_pipeline(tmp_path)


def _verify(p: Pipeline, engine: InProcessEngine | None) -> list[DatasetReport]:
    hashes = EngineHashes(lambda: engine) if engine is not None else None
    verifier = Verifier(workspace_resolver(p.ws), None, engine_hashes=hashes)
    return [verifier.verify(p.root), verifier.verify(p.derived)]


def test_the_engines_hashes_give_the_coordinators_report(p: Pipeline) -> None:
    engine = InProcessEngine()
    assert _verify(p, engine) == _verify(p, None)
    assert all(r.ok for r in _verify(p, engine))
    flip_byte(data_file(p.root, p.root_blocks[3]), 100)
    damaged = _verify(p, engine)
    assert damaged == _verify(p, None) and not damaged[0].ok
    assert "not to the physical hash the block records" in damaged[0].problems[0].message
    assert engine.calls and all(n <= 512 for n in engine.calls)


def _reversed(a: ep.HashDataFilesResponseSuccess) -> ep.HashDataFilesResponseSuccess:
    return dataclasses.replace(a, files=a.files[::-1])


def _all_claim_the_first(a: ep.HashDataFilesResponseSuccess) -> ep.HashDataFilesResponseSuccess:
    """Every file's answer says it is the first file (and hashes as it): must not be trusted."""
    return dataclasses.replace(
        a, files=tuple(dataclasses.replace(a.files[0], data_path=f.data_path) for f in a.files)
    )


def _cannot_read(a: ep.HashDataFilesResponseSuccess) -> ep.HashDataFilesResponseSuccess:
    files = tuple(ep.DataFileHashes(data_path=f.data_path, error="cannot read") for f in a.files)
    return dataclasses.replace(a, files=files)


def _bad_hash(a: ep.HashDataFilesResponseSuccess) -> ep.HashDataFilesResponseSuccess:
    return dataclasses.replace(
        a, files=tuple(dataclasses.replace(f, physical_hash="not a hash") for f in a.files)
    )


@pytest.mark.parametrize("spoil", [_reversed, _cannot_read, _bad_hash])
def test_what_the_engine_does_not_answer_properly_is_hashed_here(p: Pipeline, spoil) -> None:
    flip_byte(data_file(p.root, p.root_blocks[3]), 100)
    assert _verify(p, InProcessEngine(spoil)) == _verify(p, None)


def test_an_engine_claiming_other_hashes_is_believed_only_for_what_it_claims(
    p: Pipeline,
) -> None:
    """An engine is trusted with the hashes it computes (as the executors' split slices are):
    the answers are checked for shape, not recomputed; a lying engine makes files differ."""
    reports = _verify(p, InProcessEngine(_all_claim_the_first))
    assert not reports[0].ok


def test_an_engine_without_hash_data_files_is_asked_once(p: Pipeline) -> None:
    engine = InProcessEngine(implemented=False)
    assert _verify(p, engine) == _verify(p, None)
    assert len(engine.calls) == 1


def test_a_dataset_below_the_minimum_size_is_hashed_here_without_the_engine(
    p: Pipeline,
) -> None:
    engine = InProcessEngine()

    def start() -> InProcessEngine:
        engine.calls.append(-1)  # the engine would start here
        return engine

    size = sum(f.stat().st_size for f in (p.root.layout.root / "data").iterdir())
    below = Verifier(
        workspace_resolver(p.ws), None, engine_hashes=EngineHashes(start, min_bytes=size + 1)
    )
    assert below.verify(p.root) == _verify(p, None)[0]
    assert engine.calls == []  # never started, never asked
    at = Verifier(workspace_resolver(p.ws), None, engine_hashes=EngineHashes(start, min_bytes=size))
    assert at.verify(p.root) == _verify(p, None)[0]
    assert engine.calls[0] == -1 and len(engine.calls) == 2


def test_only_the_embedded_engine_on_a_standalone_cluster_hashes_on_executors() -> None:
    assert hashes_on_executors("spark://127.0.0.1:7077", "embedded")
    assert not hashes_on_executors("local[2]", "embedded")
    assert not hashes_on_executors("sc://127.0.0.1:15002", "embedded")
    assert not hashes_on_executors("spark://127.0.0.1:7077", "container")
    assert not hashes_on_executors("spark://127.0.0.1:7077", "remote")
