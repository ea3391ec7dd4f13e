"""A run admitted before it starts, and recorded. Imports: config, history, measure, plan, records, refcheck, serve."""
