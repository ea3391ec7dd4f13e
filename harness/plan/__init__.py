"""Arm -> preflight verdicts and per-node argv + env (pure), checked by vLLM's parser; redaction. Imports: config."""
