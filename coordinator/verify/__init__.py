"""Verification of datasets (the spec's "Dataset Validation"), for ``odf verify``.

- ``integrity``: the stored bytes alone: blocks hashed as stored, links, chain rules,
  ``refs/head``, data files (size, physical and logical hash), checkpoints;
- ``input_links``: a derivative dataset's ``queryInputs`` against its inputs' chains;
- ``replay``: every transaction run again with its pinned engine through the transform's own
  ``run_transaction``, under the policy that compares with the recorded block;
- ``input_history``: the inputs' chains read tolerantly (a damaged input is named);
- ``verifier``: all of it for the datasets of a workspace, one ``DatasetReport`` each.
"""
