"""Dataset evolution: changing a derivative dataset's query (the spec's "Query Evolution").

- ``query_change``: ValidateQuery, the schema evolution rules, the new ``SetTransform``;
- ``migration``: MigrateQuery at the switch, recorded with the new ``SetTransform``.
"""
