"""One error family for the harness, caught once at the edge (CLI or pytest plugin).

Every message says what is wrong, where (file, arm, field), and what to do next.
"""


class HarnessError(Exception):
    """Base: anything the user can fix; the CLI prints it and exits with `exit_code`."""

    exit_code = 1


class ConfigError(HarnessError):
    """A YAML file, arm name, field or override is wrong. Nothing was started."""

    exit_code = 2


class PreflightError(HarnessError):
    """An arm violates a DCP preflight rule. Nothing was started."""

    exit_code = 2


class LaunchError(HarnessError):
    """A server did not come up (exited, engine died, or timed out)."""


class WorkloadError(HarnessError):
    """A suite could not run its workload against a live server."""
