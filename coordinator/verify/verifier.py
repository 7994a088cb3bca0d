"""Verifying datasets of a workspace: integrity, input links, replay, one report each.

``Verifier.verify`` runs, for one dataset:

1. integrity (``integrity.verify_integrity``): the stored bytes alone;
2. for a derivative dataset, its ``queryInputs`` against its inputs' chains
   (``input_links``);
3. unless ``integrity_only``, for a derivative dataset whose chain could be read whole, the
   replay of every transaction with its pinned engine (``replay``).

Datasets verified earlier by the same ``Verifier`` (``--recursive``: inputs first) lend their
already read chains to the datasets downstream.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path

from common.logs import get_logger
from common.odf.block import MetadataBlock
from common.odf.errors import OdfError
from common.odf.events import AddData, ExecuteTransform, Seed, SetTransform
from common.odf.fragments import DatasetKind
from common.odf.identity import DatasetID
from coordinator.config import ExchangeFormat
from coordinator.dataset import Dataset, DatasetNotFoundError
from coordinator.engine import EngineMounts, EngineSession
from coordinator.transform.graph import inputs_first
from coordinator.transform.recorded import InputHistory
from coordinator.verify.engine_hashes import EngineHashes
from coordinator.verify.input_history import load_input_history
from coordinator.verify.input_links import input_link_problems
from coordinator.verify.integrity import IntegrityResult, StoredBlock, sorted_problems
from coordinator.verify.integrity import verify_integrity as check_integrity
from coordinator.verify.replay import Replayer, ReplayResult
from coordinator.verify.report import (
    AbsentInput,
    Check,
    DatasetReport,
    Outcome,
    Problem,
    TransactionResult,
)
from coordinator.verify.stored_chain import walk_chain
from coordinator.workspace import Workspace

log = get_logger(__name__)

Resolver = Callable[[DatasetID], Dataset]
ReplayProgress = Callable[[Dataset, ReplayResult], None]


@dataclass(eq=False)
class Verifier:
    """Verifies datasets; ``engines`` (``None`` for ``--integrity``) replays transactions."""

    resolve: Resolver
    engines: EngineSession | None
    exchange: ExchangeFormat = ExchangeFormat.PARQUET
    _: KW_ONLY
    on_replay: ReplayProgress | None = None
    on_bytes: Callable[[int], None] | None = None
    shared_staging: Path | None = None
    engine_hashes: EngineHashes | None = None
    """The data files hashed by the engine's executors (a cluster master), not here."""
    _verified: dict[DatasetID, InputHistory] = field(default_factory=dict, init=False, repr=False)

    def verify(self, dataset: Dataset) -> DatasetReport:
        log.debug(
            "verify.hashing",
            dataset=dataset.alias,
            data_files_on="executors" if self.engine_hashes is not None else "coordinator",
        )
        integrity = check_integrity(dataset.layout, self.on_bytes, self.engine_hashes)
        problems = list(integrity.problems)
        seed = _seed(integrity)
        kind = seed.dataset_kind if seed else None
        replays: dict[int, ReplayResult] = {}
        absent: list[AbsentInput] = []
        if kind is DatasetKind.DERIVATIVE:
            inputs = self._inputs(integrity)
            absent = _absent_inputs(integrity, inputs)
            present = {k: v for k, v in inputs.items() if v != ABSENT}
            problems += input_link_problems(integrity.blocks, present)
            if self.engines is not None and integrity.complete and not absent:
                replays = self._replay(dataset, integrity, inputs, self.engines)
        problems += [p for r in replays.values() for p in _replay_problems(r)]
        problems = sorted_problems(problems)
        if seed is not None and not problems:
            self._verified[seed.dataset_id] = InputHistory.of(dataset, integrity.chain.blocks)
        return DatasetReport(
            dataset=dataset.alias,
            kind=kind.value if kind else None,
            head=integrity.chain.head,
            blocks=len(integrity.blocks),
            transactions=tuple(
                _transactions(integrity.blocks, problems, replays, self.engines, bool(absent))
            ),
            problems=tuple(problems),
            replayed=bool(replays),
            absent_inputs=tuple(absent),
        )

    def _replay(
        self,
        dataset: Dataset,
        integrity: IntegrityResult,
        inputs: dict[DatasetID, InputHistory | str],
        engines: EngineSession,
    ) -> dict[int, ReplayResult]:
        """Every transaction's replay, by block sequence number."""
        replays = {}
        for result in Replayer(
            dataset, inputs, engines, self.exchange, shared_staging=self.shared_staging
        ).replay(integrity.blocks):
            replays[result.block.sequence_number or 0] = result
            if self.on_replay is not None:
                self.on_replay(dataset, result)
        return replays

    def _inputs(self, integrity: IntegrityResult) -> dict[DatasetID, InputHistory | str]:
        """Every input any SetTransform of the chain declares, read (or why not)."""
        found: dict[DatasetID, InputHistory | str] = {}
        for dataset_id, _ in declared_inputs(s.block for s in integrity.blocks):
            if dataset_id not in found:
                found[dataset_id] = self._input(dataset_id)
        return found

    def _input(self, dataset_id: DatasetID) -> InputHistory | str:
        verified = self._verified.get(dataset_id)
        if verified is not None:
            return verified
        try:
            dataset = self.resolve(dataset_id)
        except DatasetNotFoundError:
            return ABSENT
        except OdfError as e:
            return f"cannot be opened: {e}"
        return load_input_history(dataset)


def verification_order(
    datasets: Iterable[Dataset], resolve: Resolver, *, recursive: bool
) -> list[Dataset]:
    """``datasets``, inputs first; with ``recursive`` also every dataset upstream, including
    inputs that earlier queries read (every ``SetTransform`` of the chain counts).

    A dataset whose chain cannot be read is kept as it is: verifying it reports why.
    """

    def upstream(ds: Dataset) -> Iterable[Dataset]:
        if not recursive:
            return
        for input_id in _all_input_ids(ds):
            try:
                yield resolve(input_id)
            except DatasetNotFoundError:
                continue  # reported by the downstream dataset's verification

    return inputs_first(datasets, key=lambda ds: ds.layout.root, upstream=upstream)


def _all_input_ids(ds: Dataset) -> list[DatasetID]:
    blocks = (read.block for read in walk_chain(ds.layout).blocks)
    return list(dict.fromkeys(dataset_id for dataset_id, _ in declared_inputs(blocks)))


ABSENT = "not in the workspace: its links cannot be checked nor its data read"
"""Why an input's chain is not available when the workspace does not hold it."""


def _absent_inputs(
    integrity: IntegrityResult, inputs: dict[DatasetID, InputHistory | str]
) -> list[AbsentInput]:
    """The inputs the chain declares that the workspace does not hold, in declaration order."""
    absent: dict[DatasetID, AbsentInput] = {}
    for dataset_id, alias in declared_inputs(s.block for s in integrity.blocks):
        if inputs.get(dataset_id) == ABSENT and dataset_id not in absent:
            absent[dataset_id] = AbsentInput(alias, dataset_id.to_did())
    return list(absent.values())


def declared_inputs(blocks: Iterable[MetadataBlock]) -> Iterator[tuple[DatasetID, str]]:
    """Each input every SetTransform of the chain declares (id, alias), in chain order; a
    reference that is not a did:odf is left to the chain rules."""
    for block in blocks:
        event = block.event
        if not isinstance(event, SetTransform):
            continue
        for entry in event.inputs:
            try:
                dataset_id = DatasetID.from_did(entry.dataset_ref)
            except OdfError:
                continue
            yield dataset_id, entry.alias or entry.dataset_ref


def _seed(integrity: IntegrityResult) -> Seed | None:
    """The chain's Seed, when the chain could be read back to it."""
    if not integrity.complete or not integrity.blocks:
        return None
    first = integrity.blocks[0].block.event
    return first if isinstance(first, Seed) else None


def _replay_problems(result: ReplayResult) -> list[Problem]:
    if result.error is not None:
        return [
            Problem(
                check=Check.REPLAY, block=result.block, message=f"cannot replay: {result.error}"
            )
        ]
    return [
        Problem(check=Check.REPLAY, block=result.block, message=f"replay differs: {d}")
        for d in result.differences
    ]


def _transactions(
    blocks: tuple[StoredBlock, ...],
    problems: list[Problem],
    replays: dict[int, ReplayResult],
    engines: EngineSession | None,
    inputs_absent: bool = False,
) -> Iterator[TransactionResult]:
    for stored in blocks:
        event = stored.block.event
        if not isinstance(event, AddData | ExecuteTransform):
            continue
        mine = tuple(p for p in problems if p.block is not None and p.block.hash == stored.name)
        integrity_failed = any(p.check is not Check.REPLAY for p in mine)
        replay = replays.get(stored.block.sequence_number)
        if isinstance(event, AddData):
            replay_outcome = Outcome.NOT_APPLICABLE
        elif replay is None and inputs_absent and engines is not None:
            replay_outcome = Outcome.INPUTS_ABSENT
        elif replay is None:
            replay_outcome = Outcome.SKIPPED if engines is None else Outcome.NOT_APPLICABLE
        else:
            replay_outcome = Outcome.OK if replay.ok else Outcome.FAILED
        yield TransactionResult(
            block=stored.ref,
            event=_event_label(event),
            offsets=event.new_data.offset_interval if event.new_data else None,
            integrity=Outcome.FAILED if integrity_failed else Outcome.OK,
            replay=replay_outcome,
            problems=mine,
            engine=replay.engine if replay is not None else None,
        )


def tolerant_resolver(ws: Workspace) -> Resolver:
    """Datasets of ``ws`` by id, even when some of them are too damaged to open normally.

    The ids come from each dataset's state, or from its Seed block when the state cannot be
    prepared (a damaged head); a dataset whose Seed cannot be read has no id to be found by.
    """
    ids: dict[DatasetID, Dataset] | None = None

    def resolve(dataset_id: DatasetID) -> Dataset:
        nonlocal ids
        if ids is None:
            ids = {}
            for ds in ws.list_datasets():
                found = _id_of(ds)
                if found is not None:
                    ids.setdefault(found, ds)
        dataset = ids.get(dataset_id)
        if dataset is None:
            raise DatasetNotFoundError(dataset_id.to_did())
        return dataset

    return resolve


def _id_of(ds: Dataset) -> DatasetID | None:
    try:
        return ds.state().id
    except OdfError:
        chain = walk_chain(ds.layout)
        first = chain.blocks[0].block.event if chain.complete and chain.blocks else None
        return first.dataset_id if isinstance(first, Seed) else None


def replay_mounts(targets: Sequence[Dataset], resolve: Resolver) -> EngineMounts:
    """What a container engine needs to replay ``targets``: each one's staging (writable),
    its checkpoints and the data of every input it ever read (read-only)."""
    read_only, read_write = [], []
    for ds in targets:
        input_ids = _all_input_ids(ds)
        if not input_ids:
            continue
        read_write.append(ds.layout.staging_root)
        read_only.append(ds.layout.checkpoints_dir)
        for input_id in input_ids:
            try:
                read_only.append(resolve(input_id).layout.data_dir)
            except DatasetNotFoundError:
                continue  # its transactions cannot be replayed; reported per block
    return EngineMounts.of(read_only, read_write)


def hash_mounts(targets: Sequence[Dataset], mounts: EngineMounts) -> EngineMounts:
    """``mounts`` and each of ``targets``' data (read-only): what an engine hashing their
    data files reads (``engine_hashes.py``)."""
    return EngineMounts.of(
        (*mounts.read_only, *(ds.layout.data_dir for ds in targets)), mounts.read_write
    )


def _event_label(event: AddData | ExecuteTransform) -> str:
    """The event's name; a query switch's ``ExecuteTransform`` is marked as the migration."""
    if isinstance(event, ExecuteTransform) and all(
        i.new_block_hash is None for i in event.query_inputs
    ):
        return "ExecuteTransform (migration)"
    return type(event).__name__
