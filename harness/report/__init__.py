"""Report: a stored run directory -> tables, completeness, plots, HTML and annotation; never a live server. Imports config, plan (redaction), records, judge."""
