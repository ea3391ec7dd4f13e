"""Prompt sets, reference-output store, candidate-vs-reference comparison. Imports: config, serve, measure, records
(and the stdlib-only harness.tinymodel.copytask: the copy prompts are the task the GPU tiny model was trained on)."""
