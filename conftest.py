# Wires the harness's pytest plugin (options --arm/--reference/--run-dir/--set, server fixtures).
pytest_plugins = ["harness.pytest_plugin"]
