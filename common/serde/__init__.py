"""FlatBuffers and YAML serialization of the ODF model."""
