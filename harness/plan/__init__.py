"""Plan: an arm -> preflight verdicts and the exact argv + environment per node (pure), checked by vLLM's own parser; redaction. Imports harness.config only."""
