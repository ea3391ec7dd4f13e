"""Prompts, the reference store, checks. Imports: config, serve, measure, records, judge, tinymodel, probes."""

# Floors, bottom to top (each imports only the floors below it): prompts, store, judging, send, prompt_sets.
# Also the stdlib-only harness.tinymodel.copytask: the copy prompts are the task the GPU tiny model was trained on.
