"""Hidden states of models on benchmark items (RepCore inputs): upload, list, delete, load."""
