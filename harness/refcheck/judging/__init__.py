"""refcheck's third floor: outputs judged against the reference's, each check's limits and its record's fields."""
