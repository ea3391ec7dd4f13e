"""Drive a live server: HTTP client, load, telemetry, GSM8K, generations. Imports: config, plan, serve, records."""
