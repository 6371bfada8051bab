"""``pip install .`` (no extras) into a clean virtual environment: the API image's install.

The base distribution installs one top-level package, ``evalplan``; ``evalplan.client``, the web app and
the worker entry import without torch or sentence-transformers (they come with the ``[worker]`` extra
only), and the public paths API.md names exist (``evalplan.integrations.inspect.evalplan_source`` is
there; importing it needs inspect_ai, the ``[harness]`` extra). Slow (a few minutes: a real pip install of every base dependency).
"""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHECK = """
import importlib.util, json, sys, sysconfig
from pathlib import Path
import evalplan.client, evalplan.main
import evalplan.workers.tasks
from evalplan.client import EvalplanClient
from evalplan.core.selection import facility_location
inspect_spec = importlib.util.find_spec("evalplan.integrations.inspect")  # importing it needs [harness]
site = Path(sysconfig.get_paths()["purelib"])
print(json.dumps({
    "absent": [m for m in ("torch", "sentence_transformers", "transformers") if importlib.util.find_spec(m) is None],
    "loaded": sorted(m for m in ("torch", "sentence_transformers") if m in sys.modules),
    "top_level": sorted(p.name for p in site.iterdir() if p.name in ("app", "workers", "migrations", "evalplan")),
    "paths": [facility_location.__name__ == "evalplan.core.selection.facility_location", "def evalplan_source(" in Path(inspect_spec.origin).read_text(),
              EvalplanClient.__name__],
}))
"""


@pytest.mark.slow
def test_pip_install_without_extras_imports_the_app_and_client_without_torch(tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", "-c", str(ROOT / "constraints.txt"),
                              str(ROOT)], capture_output=True, text=True, timeout=1500, cwd=tmp_path)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    run = subprocess.run([str(python), "-c", CHECK], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env={"PATH": str(env_dir / "bin"), "HOME": str(tmp_path)})
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])
    assert found["absent"] == ["torch", "sentence_transformers", "transformers"], found
    assert found["loaded"] == [], found
    assert found["top_level"] == ["evalplan"], found  # no `app`, `workers` or `migrations` on the user's path
    assert found["paths"] == [True, True, "EvalplanClient"], found
    assert sys.version_info >= (3, 11)
