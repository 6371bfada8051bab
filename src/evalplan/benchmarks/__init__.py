"""Benchmarks, their items and their scores (API.md "Data"): routes, schemas, the services, the
score matrix I/O and formats, and the score statistics job."""
