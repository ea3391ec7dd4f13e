"""Configuration: YAML files -> typed, validated objects (arms, workloads, gate thresholds), paths and the error family. Imports nothing else from harness."""
