"""The pure ODF 0.35 domain model (no I/O, no serialization)."""

ODF_SPEC_VERSION = "0.35.0"
"""The version of the Open Data Fabric specification this model implements."""
