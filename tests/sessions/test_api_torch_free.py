"""The API process never imports torch (docs/DECISIONS.md): creating and stepping sessions, single- and
multi-target (with hyperparameter refits), and the coreset and backtest requests leave ``torch`` out of
``sys.modules``. Checked in a fresh interpreter, since the test process itself may hold torch."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent("""
    import json, sys, tempfile
    import numpy as np
    from fastapi.testclient import TestClient
    from evalplan.db.migrate import upgrade
    from evalplan.kit.settings import Settings
    from evalplan.main import create_app

    url = f"sqlite:///{tempfile.mkdtemp()}/torchfree.db"
    upgrade(url)
    seen = {"after import": "torch" in sys.modules}
    with TestClient(create_app(Settings(database_url=url, redis_url=None))) as c:
        rng = np.random.default_rng(0)
        Y = (rng.random((8, 40)) < 0.5).astype(int)
        csv = "model," + ",".join(f"i{j}" for j in range(40)) + "\\n"
        csv += "\\n".join(f"m{m}," + ",".join(map(str, row)) for m, row in enumerate(Y)) + "\\n"
        assert c.post("/v1/benchmarks", json={"name": "b", "score_kind": "binary"}).status_code == 201
        assert c.post("/v1/benchmarks/b/scores", content=csv, headers={"content-type": "text/csv"}).status_code == 200
        for method in ("bayesame", "bayesame_rs", "rs_mean"):
            s = c.post("/v1/sessions", json={"benchmark": "b", "target": "t", "method": method,
                                             "refit_every": 3}).json()
            for _ in range(8):
                s = c.post(f"/v1/sessions/{s['id']}/observations",
                           json={"item": s["next_items"][0], "score": 1}).json()
            c.get(f"/v1/sessions/{s['id']}/trajectory")
        seen["single-target sessions"] = "torch" in sys.modules
        s = c.post("/v1/sessions", json={"benchmark": "b", "targets": ["t0", "t1"], "refit_every": 5}).json()
        for _ in range(12):
            obs = [{"target": p["target"], "item": p["item"], "score": 1} for p in s["next"]]
            s = c.post(f"/v1/sessions/{s['id']}/observations", json={"observations": obs}).json()
        c.get(f"/v1/sessions/{s['id']}/trajectory")
        seen["multi-target session with refits"] = "torch" in sys.modules
        seen["n_refit_observations"] = s["n_observed"]
    print(json.dumps(seen))
""")


@pytest.mark.slow
def test_sessions_never_import_torch(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=root, capture_output=True, text=True, timeout=600,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1",
                              "PYTHONPATH": str(root / "src"), "EVALPLAN_LOG_LEVEL": "WARNING"})
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen.pop("n_refit_observations") >= 10  # two refits happened
    assert seen == {"after import": False, "single-target sessions": False,
                    "multi-target session with refits": False}, seen
