"""Measure: drive a live server (one HTTP client, load generation, /metrics + NVML telemetry, GSM8K through lm-eval, greedy generations). Imports config, plan, serve, records."""
