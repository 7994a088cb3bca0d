"""Sharing datasets with repositories: ``odf push`` and ``odf pull`` of remote datasets.

- ``remote_refs``: the spec's remote references resolved to a dataset URL (pure);
- ``repos``: repository aliases (``.odf/repos.json``) and each dataset's remembered pull
  and push URLs (``info/remotes.json`` in its directory);
- ``transport``: reading (Simple Transfer Protocol) and writing a remote dataset, over
  ``file://`` (``transport_file``) and ``http(s)://`` (``transport_http``, read-only);
- ``validation``: remote content checked before it is accepted (pure over the bytes);
- ``transfer``: what the other side lacks, fetched in parallel and committed atomically;
  clone, update, push.
"""
