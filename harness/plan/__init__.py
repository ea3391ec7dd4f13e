"""Arm -> preflight verdicts, per-node argv + env (pure), vLLM's parser check; redaction. Imports: config, probes."""
