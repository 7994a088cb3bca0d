"""Shared ODF core: metadata model, serialization, hashes and identities."""
