from harness.cli import main
from harness.qualify.interrupts import exit_with, sigint_interrupts

sigint_interrupts()  # launched in the background by a non-interactive shell, the process inherits SIGINT ignored
exit_with(main())
