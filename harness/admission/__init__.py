"""Checks before a run: arms, workloads, machine, vLLM. Imports: config, measure, plan, records, refcheck, serve."""
