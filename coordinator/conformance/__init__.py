"""The engine conformance kit: data-only cases of the ODF engine contract, run against any
engine (an image, an address, or our embedded engine), with a report per case.

``load_cases`` reads a directory of YAML cases (validated against ``case.schema.json``),
``run_cases`` runs them against an ``EngineClient``, and ``report`` renders the outcomes
(table, JSON, JUnit XML). ``testing`` is the entry point for another project's pytest.
"""
