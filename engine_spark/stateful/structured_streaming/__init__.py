"""Spark Structured Streaming driven one transaction at a time, its state in the checkpoint."""
