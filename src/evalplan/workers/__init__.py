"""Job execution: the Celery app and tasks (production) and the in-process thread pool (embedded)."""
