"""Serve: a plan -> a live local server process (start, health, stop the whole tree) and its log parsed. Imports harness.config and harness.plan."""
