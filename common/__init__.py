"""Shared ODF core: metadata model, serialization, hashes and identities."""

import os

# Commands start engines and containers (fork + exec) while gRPC channels may be open; gRPC's
# fork handlers then crash the child before it execs (SIGABRT, "epoll_wait error: Bad file
# descriptor", about 2% of starts). Read by grpc when it is first imported, so set here.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
