import sys

from harness.tinymodel.generate import main

sys.exit(main())
