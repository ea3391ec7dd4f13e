"""Drive a live server: HTTP, load, telemetry, GSM8K, generations. Imports: config, console, plan, serve, records."""
# Also the op-level DCP runner (opcheck.py): a subprocess of the server interpreter, no server and no harness.opcheck
# import (it runs `-m harness.opcheck.runner` there and reads the JSON it writes).
