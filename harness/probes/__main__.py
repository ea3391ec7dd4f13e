import sys

from harness.probes.answer import main

sys.exit(main(sys.argv[1:]))
