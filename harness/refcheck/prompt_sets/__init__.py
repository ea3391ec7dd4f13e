"""refcheck's top floor: the prompt sets the suite catalogue names (registry.py) and each family's set of them."""
