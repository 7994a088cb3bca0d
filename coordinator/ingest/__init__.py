"""Root-dataset ingestion: push (``odf ingest``) and polling (``odf pull``) sources.

The pipeline follows the reference coordinator: fetch (polling only) → prepare → read →
preprocess → merge → write. Each phase is its own module; ``push`` and ``polling`` plan and
commit through the dataset storage API. ``docs/ingest.md`` describes the semantics and where
this implementation departs from the reference.
"""

DEFAULT_MAX_RECORDS = 1_000_000
"""Records per data file that compaction (``odf compact``) merges slices into, at most."""
