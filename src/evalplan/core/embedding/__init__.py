"""Item texts and their sentence-transformers embeddings."""
