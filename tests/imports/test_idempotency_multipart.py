"""Idempotency-Key on multipart uploads: a retry with a fresh boundary is the same request."""

import io

from evalplan.kit.middleware import request_fingerprint
from support.lm_eval_logs import make_docs, samples_log_bytes


def _fingerprint(boundary: bytes, text: bytes) -> str:
    body = b"--" + boundary + b"\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\n" + text + b"\r\n--" + boundary + b"--\r\n"
    return request_fingerprint(b"multipart/form-data; boundary=" + boundary, b"", io.BytesIO(body))


def test_fingerprint_ignores_the_multipart_boundary():
    assert _fingerprint(b"abc123", b"m1") == _fingerprint(b"zzzz99999", b"m1")
    assert _fingerprint(b"abc123", b"m1") != _fingerprint(b"abc123", b"m2")


def test_fingerprint_of_plain_bodies_depends_on_content_type_and_query():
    body = io.BytesIO(b"[]")
    base = request_fingerprint(b"application/json", b"", body)
    assert base == request_fingerprint(b"application/json", b"", io.BytesIO(b"[]"))
    assert base != request_fingerprint(b"application/json", b"metric=x", io.BytesIO(b"[]"))
    assert base != request_fingerprint(b"text/csv", b"", io.BytesIO(b"[]"))


def test_lm_eval_import_retry_with_same_key_replays(client):
    task = "arc_easy"
    data = samples_log_bytes(task, make_docs(5, seed=1))
    files = [("files", (f"samples_{task}_2024-06-26T12-00-00.123456.jsonl", data, "application/jsonl"))]
    first = client.post("/v1/imports/lm-eval", data={"model": "org/m-1"}, files=files, headers={"Idempotency-Key": "imp-1"})
    assert first.status_code == 201, first.text
    again = client.post("/v1/imports/lm-eval", data={"model": "org/m-1"}, files=files, headers={"Idempotency-Key": "imp-1"})
    assert again.status_code == 201
    assert again.headers.get("idempotent-replayed") == "true"
    assert again.json() == first.json()
    other = client.post("/v1/imports/lm-eval", data={"model": "org/m-2"}, files=files, headers={"Idempotency-Key": "imp-1"})
    assert other.status_code == 422
