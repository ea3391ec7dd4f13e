"""Judge: statistics, gates and checks as pure functions of records (no I/O). Imports harness.config and harness.records."""
