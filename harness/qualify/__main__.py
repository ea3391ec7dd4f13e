"""`python -m harness.qualify --run DIR --exit-code CODE [--baseline RUN]`: qualify's judge, record-the-end and render
step in a fresh interpreter (render.render_in_fresh_process); the same as `harness report` with those options."""

import argparse
import sys

from harness.config.errors import HarnessError
from harness.qualify.render import report

parser = argparse.ArgumentParser(prog="python -m harness.qualify")
parser.add_argument("--run", required=True)
parser.add_argument("--exit-code", type=int, required=True)
parser.add_argument("--baseline")
args = parser.parse_args()
try:
    sys.exit(report(args.run, args.baseline, args.exit_code))
except HarnessError as exc:
    print(f"error: {exc}", file=sys.stderr)
    sys.exit(exc.exit_code)
