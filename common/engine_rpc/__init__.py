"""Typed access to the generated gRPC stubs of ``proto/engine.proto``."""

from common.engine_rpc.grpc_generated import engine_pb2, engine_pb2_grpc

SPEC_ENGINE_PORT = 5544
"""The port the ODF spec names for engines."""

REFERENCE_ENGINE_PORT = 2884
"""The port the reference coordinator (kamu-cli) dials inside an engine container."""

__all__ = ["REFERENCE_ENGINE_PORT", "SPEC_ENGINE_PORT", "engine_pb2", "engine_pb2_grpc"]
