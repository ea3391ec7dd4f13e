"""Prompt sets, reference-output store, candidate-vs-reference comparison. Imports: config, serve, measure, records."""
