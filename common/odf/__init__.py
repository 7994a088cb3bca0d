"""The pure ODF 0.35 domain model (no I/O, no serialization)."""
