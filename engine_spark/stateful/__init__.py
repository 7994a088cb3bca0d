"""Stateful queries: the runners that carry state across transactions in the checkpoint.

See ``registry`` for how a runner is chosen and ``runner`` for what every runner does.
"""
