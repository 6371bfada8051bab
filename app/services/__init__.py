"""Use-cases shared by the API and the workers: load from the DB, call core, persist."""
