"""Computing a ``DatasetState`` without rescanning the chain every time.

The state of the last head seen is stored in ``.coordinator/state.json`` as the head hash,
the running data size, the ``origins`` (block hashes of each event-valued field) and the
figures ``odf list`` shows (``coordinator.dataset.listing``, read there without decoding a
block; a cache without them is rewritten at the next open). To open
a dataset we read the head and those few blocks and replay them; if the head moved on since,
only the new blocks are folded in. The cache is a pure optimisation: anything unexpected
(missing, damaged, not an ancestor of the head) falls back to folding the whole chain.
"""

from __future__ import annotations

import json

from common.logs import get_logger
from common.odf.block import MetadataBlock
from common.odf.errors import OdfError
from common.odf.multihash import Multihash
from coordinator.dataset import durable, listing
from coordinator.dataset.chain import MetadataChain
from coordinator.dataset.state import DatasetState, advance, fold, with_head
from coordinator.tempdirs import require_real_dir

log = get_logger(__name__)

_FORMAT = 1


def save(chain: MetadataChain, state: DatasetState) -> None:
    """Store ``state`` for later opens; best effort (a failure only costs a rescan later)."""
    if state.head is None:
        return
    doc = {
        "format": _FORMAT,
        "head": state.head.to_multibase(),
        "data_size": state.data_size,
        "origins": [[key, h.to_multibase()] for key, h in state.origins],
        listing.SUMMARY_KEY: listing.summary_doc(state),
    }
    try:
        require_real_dir(chain.layout.private_dir, create=True)
        durable.write_atomic(chain.layout.state_cache_path, json.dumps(doc).encode(), sync=False)
    except (OSError, OdfError) as e:
        log.debug("could not save the state cache", error=str(e))


def load(chain: MetadataChain) -> tuple[DatasetState, bool] | None:
    """The cached state (of whatever head it was saved for) and whether the cache holds its
    listing figures too, or ``None``."""
    try:
        if not require_real_dir(chain.layout.private_dir):
            return None
        doc = json.loads(chain.layout.state_cache_path.read_text(encoding="utf-8"))
        if doc.get("format") != _FORMAT:
            return None
        head = Multihash.from_multibase(doc["head"])
        origins = [(str(k), Multihash.from_multibase(h)) for k, h in doc["origins"]]
        state = _replay(chain, head, int(doc["data_size"]), origins)
        return state, doc.get(listing.SUMMARY_KEY) == listing.summary_doc(state)
    except (OSError, ValueError, KeyError, TypeError, OdfError) as e:
        log.debug("ignoring the state cache", error=str(e))
        return None


def _replay(
    chain: MetadataChain, head: Multihash, data_size: int, origins: list[tuple[str, Multihash]]
) -> DatasetState:
    head_block = chain.get_block(head)
    blocks: dict[Multihash, MetadataBlock] = {h: chain.get_block(h) for _, h in origins}
    ordered = sorted(blocks.items(), key=lambda kv: kv[1].sequence_number)
    return with_head(fold(ordered), head, head_block, data_size=data_size)


def compute(chain: MetadataChain, head: Multihash | None) -> tuple[DatasetState, bool]:
    """The state as of ``head`` and whether the saved cache was already at ``head`` (and
    complete: a cache without the listing figures, or with wrong ones, is to be saved again).

    Uses the cache plus the blocks added since it was saved, or else folds the whole chain.
    """
    if head is None:
        return DatasetState(), True
    loaded = load(chain)
    cached = loaded[0] if loaded is not None else None
    if loaded is not None and loaded[0].head == head:
        return loaded[0], loaded[1]
    return _catch_up(chain, head, cached), False


def _catch_up(chain: MetadataChain, head: Multihash, cached: DatasetState | None) -> DatasetState:
    newer: list[tuple[Multihash, MetadataBlock]] = []
    for h, block in chain.iter_blocks(head):
        if cached is not None and block.sequence_number <= cached.sequence_number:
            if h == cached.head:
                state = cached
                for nh, nb in reversed(newer):
                    state = advance(state, nh, nb)
                return state
            break
        newer.append((h, block))
    return fold(list(reversed(newer))) if cached is None else _full(chain, head)


def _full(chain: MetadataChain, head: Multihash) -> DatasetState:
    return fold(list(reversed(list(chain.iter_blocks(head)))))
