"""refcheck's bottom floor: the reference checks' prompts, cells and plans (pure), what is sent and in which order."""
