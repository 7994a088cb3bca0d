"""Derivative transformations: the coordinator's side of the spec's "Derivative Transformations".

- ``plan``: the batch step (pure): how far the next transaction may take each input;
- ``inputs``: reading the inputs' unprocessed blocks;
- ``exchange``: input slices for the engine (memory-mapped Arrow IPC files, or Parquet);
- ``output``: contract checks and hashes of the engine's output, the events to commit;
- ``transaction``: one engine transaction from plan to a settled result, under a policy
  (commit it, collect its events, or compare them with a recorded block for verification);
- ``migration``: MigrateQuery transactions at a query switch;
- ``recorded``: the input side of recorded transactions (replay, migration plans);
- ``runner``: ``Transformer``, bringing datasets up to date with the engines of one command;
- ``graph``: dependency order; ``creation``: pinning and validating new transforms.
"""
