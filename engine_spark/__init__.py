"""The ODF Spark engine: one warm SparkSession behind the engine gRPC service.

``python -m engine_spark`` (or ``odf-engine-spark``) starts the server; ``engine_spark.engine``
holds the transformation logic as a plain Python API over ``common.odf.engine_protocol``.
"""

import os

# The server starts Spark (which forks the JVM launcher) while gRPC threads are running;
# gRPC's fork handlers break the child then. Read by grpc when it is first imported.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
