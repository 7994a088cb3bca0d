"""The SQL sandbox: what a query may do, decided on Spark's own plans.

``policy`` walks the parsed and analyzed plans (``Sandbox``, ``Policy``); ``rules`` lists the
allowed plan nodes, functions and table-valued functions; ``expressions`` lists the allowed
Catalyst expression classes.
"""

from engine_spark.sandbox.policy import Policy, Sandbox

__all__ = ["Policy", "Sandbox"]
