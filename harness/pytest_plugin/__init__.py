"""pytest plugin: options, servers per arm, reference capture, recording. Imports: every stage; imported by none."""
