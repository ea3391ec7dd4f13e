"""qualify as named steps; plan; report. Imports: admission, config, console, plan, records, report, serve."""
