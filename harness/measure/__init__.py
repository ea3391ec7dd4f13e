"""Drive a live server: HTTP, load, telemetry, GSM8K. Imports: config, console, plan, serve, records, opcheck, judge."""
# opcheck: the op-level DCP runner (opcheck.py) is a subprocess of the server interpreter, no server and no
# harness.opcheck import (it runs `-m harness.opcheck.runner` there and reads the JSON it writes).
# judge: the pure output-consistency check (judge/output_consistency.py) applied as each output is recorded; judge
# imports only config and records, so no cycle.
