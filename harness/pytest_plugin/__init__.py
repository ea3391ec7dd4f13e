"""pytest plugin: options, servers, reference capture, known-good floors, recording. Imports: every stage."""

# The root conftest.py names this package; pytest then loads the hook and fixture modules listed here.
pytest_plugins = ["harness.pytest_plugin.options", "harness.pytest_plugin.started_run",
                  "harness.pytest_plugin.fixtures", "harness.pytest_plugin.grouping"]
