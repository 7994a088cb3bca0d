"""Serialization of the ODF model: FlatBuffers (the canonical binary form) and YAML."""
