"""Tiny-model generator; runs in the *server* environment (torch, transformers). Imports: nothing from harness."""
