"""Nightly CI on Buildkite: arm groups -> pipeline steps (pure), the previous nightly's build. Imports: config."""
