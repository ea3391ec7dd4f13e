"""Terminal status lines for long phases and the per-run harness.log. Imports: nothing else in harness."""
