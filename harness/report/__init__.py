"""Run dir -> tables, plots, trend, HTML, annotation. Imports: config, plan.redact, records, judge, history."""
