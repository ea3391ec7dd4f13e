"""YAML -> typed, validated arms, workloads and gate thresholds; paths; errors. Imports: nothing else in harness."""
