"""Fuzzing of `pipelines.ingest` over mutations of the hostile corpus."""
