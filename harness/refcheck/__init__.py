"""Reference checks: deterministic prompt sets, the reference-output store, and candidate-vs-reference comparison. Imports config, plan, serve, measure, records."""
