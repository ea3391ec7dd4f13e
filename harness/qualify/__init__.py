"""qualify as named steps; plan; report. Imports: admission, config, console, history, plan, records, report, serve."""
