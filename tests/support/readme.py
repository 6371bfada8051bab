"""README.md's code blocks, for the tests that run them (tests/deploy/test_readme_*.py).

* :func:`section`: the text of one ``## `` section.
* :func:`code_blocks`: its fenced blocks ``(language, text)``, verbatim.
* :func:`shown_examples`: the blocks README.md shows from a file under ``examples/`` between
  ``<!-- example: PATH -->`` and ``<!-- /example -->``; :func:`example_body` is what they must equal, the
  file from its marker line (``... shows the rest of this file ----``) on.
* :func:`script_env`: the environment a README command runs in (``evalplan`` and ``python`` on ``PATH``).
* :func:`documents`: the JSON documents a command printed.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from support.helpers import ROOT

README = ROOT / "README.md"
EXAMPLE_MARK = "shows the rest of this file ----\n"
DATA = Path(os.environ.get("EVALPLAN_DATA_DIR", ROOT.parent / "shared" / "data"))


def readme() -> str:
    return README.read_text(encoding="utf-8")


def section(title: str) -> str:
    text = readme()
    assert f"\n## {title}\n" in text, f"README.md has no section {title!r}"
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def code_blocks(text: str) -> list[tuple[str, str]]:
    return re.findall(r"^```(\w*)\n(.*?)^```$", text, re.S | re.M)


def shown_examples(text: str | None = None) -> dict[str, str]:
    """``examples/...`` path -> the block README.md (or ``text``) shows for it."""
    found = re.findall(r"<!-- example: (examples/[\w./-]+) -->\n```\w*\n(.*?)```\n<!-- /example -->",
                       readme() if text is None else text, re.S)
    return dict(found)


def example_body(path: str) -> str:
    text = (ROOT / path).read_text(encoding="utf-8")
    assert EXAMPLE_MARK in text, f"{path} has no marker line ending in {EXAMPLE_MARK.strip()!r}"
    return text.split(EXAMPLE_MARK, 1)[1]


def script_env(**extra: str) -> dict[str, str]:
    """This environment with the venv's ``evalplan`` and ``python`` first on ``PATH``, offline, plus ``extra``."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return {**os.environ, "PATH": path, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1", **extra}


def fresh_shell_env(**extra: str) -> dict[str, str]:
    """A new user's shell: no venv activated (neither its ``bin`` on ``PATH`` nor ``VIRTUAL_ENV`` / ``PYTHONPATH``),
    offline, plus ``extra``; README commands reach the venv through ``./dev.sh run`` (issue 34 failure 2)."""
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if p and Path(p).resolve() != Path(venv_bin).resolve())
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    return {**env, "PATH": path or os.defpath, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", **extra}


def documents(out: str) -> list[Any]:
    """The JSON documents a command printed one after another (curl prints an API answer without a newline)."""
    decoder, found, at = json.JSONDecoder(), [], 0
    while (at := len(out) - len(out[at:].lstrip())) < len(out):
        value, at = decoder.raw_decode(out, at)
        found.append(value)
    return found
