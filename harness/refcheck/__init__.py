"""Prompts, the reference store, checks. Imports: config, serve, measure, records, judge, tinymodel, probes."""

# Also the stdlib-only harness.tinymodel.copytask: the copy prompts are the task the GPU tiny model was trained on.
