"""Checks before a run starts: arms, workloads, machine, vLLM. Imports: config, measure, plan, records, serve."""
