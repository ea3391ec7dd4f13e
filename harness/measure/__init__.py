"""Drive a live server: HTTP, load, telemetry, GSM8K. Imports: config, console, plan, serve, records, opcheck."""
# opcheck: the op-level DCP runner (opcheck.py) is a subprocess of the server interpreter, no server and no
# harness.opcheck import (it runs `-m harness.opcheck.runner` there and reads the JSON it writes).
