"""Stored run dir -> tables, completeness, plots, HTML, annotation. Imports: config, plan.redact, records, judge."""
