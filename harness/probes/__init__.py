"""vLLM probes: questions asked of the *server* environment's vLLM (`python -m harness.probes`). Imports: nothing."""
