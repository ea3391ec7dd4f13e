"""qualify; plan; report. Imports: admission, calibrate, config, console, history, plan, records, report, serve."""
