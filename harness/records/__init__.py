"""Results schema (results.jsonl), its reader/writer, run.json, the one JSONL reader. Imports: config."""
