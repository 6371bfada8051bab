"""docs/ARCHITECTURE.md matches the code (issue 36 item 7): every module of the domain packages is named in it
(the science core and the pages are described by folder), and the session path it walks is the real one."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "evalplan"
DOC = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
DESCRIBED_BY_FOLDER = ("core", "ui", "migrations")


def test_every_domain_module_is_named() -> None:
    missing = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        if rel.name == "__init__.py" or rel.parts[0] in DESCRIBED_BY_FOLDER or "__pycache__" in rel.parts:
            continue
        if not re.search(rf"(?<![\w/]){re.escape(rel.name)}|{re.escape(rel.as_posix())}", DOC):
            missing.append(rel.as_posix())
    assert not missing, f"docs/ARCHITECTURE.md does not name: {missing}"


def test_the_session_path_it_walks_exists() -> None:
    start = DOC.index("the session path is")
    walk = DOC[start:DOC.index("\n\n", start)]
    named = re.findall(r"`((?:src/evalplan/)?[\w/]+\.py)", walk)
    assert len(named) >= 5, named
    for name in named:
        path = ROOT / name if name.startswith("src/") else SRC / name
        if not path.exists():
            path = SRC / "sessions" / name
        assert path.exists(), name
    assert "three hops" not in DOC
