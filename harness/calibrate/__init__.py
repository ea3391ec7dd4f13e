"""`harness calibrate`: K clean repeats -> each check's limits and floor. Imports: config, judge, records, refcheck."""
