"""The ODF Spark engine: one warm SparkSession behind the engine gRPC service.

``python -m engine_spark`` (or ``odf-engine-spark``) starts the server; ``engine_spark.engine``
holds the transformation logic as a plain Python API over ``common.odf.engine_protocol``.
"""
