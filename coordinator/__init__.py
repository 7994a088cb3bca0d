"""The ODF coordinator: workspace, dataset storage, ingestion, transformation, verification."""
