"""The calibrate tests' store fixture (written_repeats.py)."""

from written_repeats import store  # noqa: F401  (a fixture: pytest finds it by name)
