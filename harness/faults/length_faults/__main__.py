"""`python -m harness.faults.length_faults ...`: the CLI (harness/faults/length_faults/cli.py)."""

import sys

from harness.faults.length_faults.cli import main

sys.exit(main())
