"""pytest plugin: options, servers, references. Imports: admission, config, measure, plan, records, refcheck, serve."""

# The root conftest.py names this package; pytest then loads the hook and fixture modules listed here.
pytest_plugins = ["harness.pytest_plugin.options", "harness.pytest_plugin.started_run",
                  "harness.pytest_plugin.fixtures", "harness.pytest_plugin.grouping"]
