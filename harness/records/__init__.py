"""Records: the versioned results schema (results.jsonl), its reader/writer, run.json and one JSONL reader. Imports harness.config only."""
