"""Planted faults: vLLM source edits (DCP ops; length, batch, band) and their kill matrix. Imports: config, probes."""
