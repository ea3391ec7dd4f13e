"""Stored run dir -> tables, completeness, plots, HTML, trend, annotation. Imports: config, plan.redact, records, judge,
history."""
