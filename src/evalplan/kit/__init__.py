"""The shared runtime every domain uses: settings, the database engine, errors and problem+json,
pagination, ids, middleware, the job runtime, FastAPI dependencies, the caller, shared validation."""
