"""Statistics, gates and checks as pure functions of records; no I/O. Imports: config, records."""
