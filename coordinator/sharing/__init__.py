"""Sharing datasets with repositories: ``odf push`` and ``odf pull`` of remote datasets.

- ``remote_refs``: the spec's remote references resolved to a dataset URL (pure);
- ``repos``: repository aliases (``.odf/repos.json``) and each dataset's remembered pull
  and push URLs (``info/remotes.json`` in its directory);
- ``transport``: reading a remote dataset (the Simple Transfer Protocol's four keys) over
  ``file://`` (``transport_file``), ``http(s)://`` (``transport_http``, read-only) and
  ``odf+http(s)://`` (``transport_smart``);
- ``objects``: data files and checkpoints received, hashed and size-checked as they arrive;
- ``validation``: received blocks checked before they are accepted (pure); ``limits``;
- ``transfer``: what the receiving side lacks, fetched in parallel and committed atomically:
  clone, update, push to ``file://``;
- ``serving``: the workspace's datasets served read-only by ``odf serve``;
- ``smart_messages``, ``smart_server``, ``transport_smart``: the Smart Transfer Protocol's
  pull flow (messages and metadata batches, the server's session, the client).
"""
