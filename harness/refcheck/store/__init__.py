"""refcheck's second floor: what is kept on disk beside the reference outputs (floors, fp32 scores, self-noise)."""
