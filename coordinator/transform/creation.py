"""Creating derivative datasets: pin the engine and validate the query (``odf add``).

Reproducibility needs every transaction of a transform to run the very same engine, so when a
derivative dataset is created its ``SetTransform.transform.version`` is resolved to exactly
what will run: the engine image's digest (``repository@sha256:...``) in container mode, the
embedded engine's build in embedded mode. A version the snapshot already gives is kept as it
is (pulling will need an engine of that version).

When every input already has a schema, the engine's ValidateQuery checks the query against
those schemas, so a typo is an error at ``odf add``, not at the first pull. Inputs without
data yet (typically created in the same ``odf add``) make the check wait for the first pull.
The engine is started only if some query can be validated.
"""

from __future__ import annotations

from dataclasses import replace

from common.logs import get_logger
from common.odf import engine_protocol as ep
from common.odf.errors import ValidationError
from common.odf.events import MetadataEvent, SetTransform, SetVocab
from common.odf.fragments import DatasetVocabulary, TransformSql
from common.odf.snapshot import DatasetSnapshot
from coordinator.dataset import DatasetNotFoundError
from coordinator.dataset.snapshot_events import normalize_transform
from coordinator.dataset.state import resolve_vocab
from coordinator.engine.errors import EngineInvalidQueryError, EngineVersionError
from coordinator.engine.names import check_engine_name
from coordinator.engine.provider import EngineSession
from coordinator.workspace import Workspace

log = get_logger(__name__)


class TransformCreation:
    """Prepares snapshots of one ``odf add`` (``prepare``), with one lazily started engine."""

    def __init__(self, ws: Workspace, engines: EngineSession) -> None:
        self.ws = ws
        self.engines = engines

    def prepare(self, snapshot: DatasetSnapshot) -> DatasetSnapshot:
        """``snapshot`` with its transform pinned and validated (other snapshots unchanged)."""
        events = list(snapshot.metadata)
        for i, event in enumerate(events):
            if isinstance(event, SetTransform):
                try:
                    events[i] = self._prepare_transform(snapshot, event)
                except ValidationError as e:
                    raise e.at(f"metadata[{i}]") from None
        return replace(snapshot, metadata=tuple(events))

    def _prepare_transform(self, snapshot: DatasetSnapshot, event: SetTransform) -> SetTransform:
        transform = event.transform
        check_engine_name(transform.engine, path="transform.engine")
        if transform.version is None:
            version = self.engines.default_version()
            if version is not None:
                transform = replace(transform, version=version)
        else:
            try:
                self.engines.provider.check_version(transform.version)
            except EngineVersionError as e:
                # Kept as given: pulling will need an engine of that version.
                log.info("add.query_not_validated", dataset=snapshot.name, reason=str(e))
                return event
        self._validate(snapshot, event, transform)
        return replace(event, transform=transform)

    def _validate(
        self, snapshot: DatasetSnapshot, event: SetTransform, transform: TransformSql
    ) -> None:
        inputs = []
        for i, entry in enumerate(event.inputs):
            try:
                ds = self.ws.open_dataset(entry.dataset_ref)
            except DatasetNotFoundError:
                return  # reported with its field path when the dataset is created
            schema = ds.state().schema_bytes
            if schema is None:
                log.info("add.query_not_validated", dataset=snapshot.name, input=i)
                return
            inputs.append(
                ep.ValidateQueryInput(
                    query_alias=entry.alias or ds.alias, schema=schema, vocab=ds.state().vocab
                )
            )
        request = ep.ValidateQueryRequest(
            dataset_alias=snapshot.name,
            vocab=_vocab(snapshot.metadata),
            transform=normalize_transform(transform),
            query_inputs=tuple(inputs),
        )
        try:
            self.engines.get(transform.version).validate_query(request)
        except EngineInvalidQueryError as e:
            raise ValidationError(f"invalid query: {e.detail}", path="transform") from None


def _vocab(events: tuple[MetadataEvent, ...]) -> DatasetVocabulary:
    set_vocab = next((e for e in reversed(events) if isinstance(e, SetVocab)), None)
    return resolve_vocab(set_vocab)
