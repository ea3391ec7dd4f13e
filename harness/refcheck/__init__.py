"""Prompt sets, the reference-output store, comparisons. Imports: config, serve, measure, records, tinymodel, probes."""

# Also the stdlib-only harness.tinymodel.copytask: the copy prompts are the task the GPU tiny model was trained on.
