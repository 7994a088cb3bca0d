"""Dataset evolution: changing a derivative dataset's query (the spec's "Query Evolution").

- ``query_change``: ValidateQuery, the schema evolution rules, the new ``SetTransform`` and
  the MigrateQuery transaction at the switch (run by ``coordinator.transform.transaction``).
"""
