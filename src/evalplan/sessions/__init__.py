"""Sequential evaluation sessions (``/v1/sessions``, BayesAME, papers/004), split along their jobs."""
