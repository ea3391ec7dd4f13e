from harness.cli import main
from harness.qualify.interrupts import exit_with

exit_with(main())
