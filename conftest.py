# Wires the harness's pytest plugin (options --arm/--reference/--run-dir/--set, server fixtures); pytester lets the
# plugin's own tests run it in a throwaway session.
pytest_plugins = ["harness.pytest_plugin", "pytester"]
