"""The coordinator daemon (``odf serve``): one long-running coordinator per workspace.

- ``rundir``: ``.odf/run/``: the lock that makes the daemon one per workspace, its
  ``daemon.json`` (pid, addresses, start time) and its token;
- ``server``: the gRPC server (token-authenticated, health) and the HTTP server
  (``/healthz``), from start to a graceful stop.

The daemon serves the workspace's ``coordinator.app.Application``, the same application layer
the CLI runs in process.
"""
