"""Drive a live server: HTTP, load, telemetry, GSM8K. Imports: config, console, plan, serve, records, opcheck, judge."""
# opcheck: run as a subprocess of the server interpreter, never imported; judge: the pure output-consistency check
