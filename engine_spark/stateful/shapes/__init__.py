"""The stateful shapes users write, recognised in a query's plan and run as batch queries over
the rows they keep (``stateful/shaped.py`` is their runner): ranked rows (the latest row or a
top N per key or overall, ``ranked_rows.py``), running aggregates per key ordered by event
time (``running_aggregate.py``) and SELECT DISTINCT gated by the watermark
(``distinct_rows.py``). Shared with the top-N runner (``ranked_rows``): at the plan layer."""
