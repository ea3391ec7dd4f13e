"""Every run in one store (SQLite), metric series across runs, change points. Imports: config, records."""
