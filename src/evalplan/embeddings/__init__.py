"""Item-text embeddings: the ``embed`` job, the ``(text hash, model)`` cache and bulk loads."""
