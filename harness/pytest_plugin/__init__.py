"""The pytest plugin: options, one server per arm per session, reference capture, recording results. Imports every stage; nothing imports it."""
