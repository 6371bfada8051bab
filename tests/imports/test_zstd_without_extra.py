"""Issue 34 failure 3: an inspect log with zstd members, on a server without the [inspect] extra, is answered
501 naming the extra (docs/API_NOTES.md), not a misleading 422 "not a readable zip archive"."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "inspect"

# A fresh interpreter where zipfile_zstd and inspect_ai cannot be imported (a base install): None in
# sys.modules makes `import` raise ImportError. The zstd codec must not be loaded before, so no pytest here.
SCRIPT = """
import json, sys
sys.modules["zipfile_zstd"] = None
sys.modules["inspect_ai"] = None
from evalplan.imports.harness import check_archives
from evalplan.kit.errors import EvalplanError
path = sys.argv[1]
try:
    check_archives([(path.rsplit("/", 1)[-1], open(path, "rb").read())], 10**9)
    print(json.dumps({"status": None}))
except EvalplanError as exc:
    print(json.dumps({"status": exc.status, "detail": exc.detail, "errors": exc.errors}))
"""


def test_zstd_inspect_log_without_the_extra_is_501_naming_it() -> None:
    log = next(EXAMPLE.glob("*.eval"))
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(log)], capture_output=True, text=True, timeout=120,
                         check=True)
    answer = json.loads(out.stdout.strip().splitlines()[-1])
    assert answer["status"] == 501, answer
    assert "[inspect]" in answer["detail"] and "zstd" in answer["detail"]
    assert answer["errors"][0]["file"] == log.name


def test_a_broken_zip_is_still_422() -> None:
    from evalplan.imports.harness import check_archives
    from evalplan.kit.errors import InvalidInput

    try:
        check_archives([("x.eval", b"PK\x03\x04 not a zip")], 10**9)
    except InvalidInput as exc:
        assert "not a readable zip archive" in exc.detail
    else:
        raise AssertionError("a broken zip passed")
