"""Helpers for tests and tools that drive real components (container runtimes)."""
