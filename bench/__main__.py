"""``python -m bench`` lists the benches; ``python -m bench NAME [ARGS...]`` runs one.

Benches are grouped by what they measure: ``bench/sessions/`` (sequential sessions), ``bench/coresets/``
(static coresets, intervals, the planner), ``bench/service/`` (the HTTP service: uploads, load, pages);
``bench/common/`` holds what they share (data loading, server start, percentiles, doc sections).
"""

from __future__ import annotations

import importlib
import pkgutil
import runpy
import sys
from pathlib import Path

GROUPS = ("sessions", "coresets", "service")


def benches() -> dict[str, str]:
    """Bench name -> module path (``auto_bench`` -> ``bench.coresets.auto_bench``)."""
    root = Path(__file__).resolve().parent
    found: dict[str, str] = {}
    for group in GROUPS:
        for info in pkgutil.iter_modules([str(root / group)]):
            if not info.name.startswith("_"):
                found[info.name] = f"bench.{group}.{info.name}"
    return dict(sorted(found.items()))


def summary(module: str) -> str:
    """The first line of a bench's docstring, without importing its dependencies' heavy parts."""
    path = Path(__file__).resolve().parents[1] / (module.replace(".", "/") + ".py")
    text = path.read_text(encoding="utf-8")
    for quote in ('"""', "'''"):
        if quote in text:
            body = text.split(quote, 2)[1].strip()
            return body.splitlines()[0] if body else ""
    return ""


def main(argv: list[str]) -> int:
    found = benches()
    if not argv or argv[0] in {"-h", "--help", "list"}:
        print("usage: python -m bench NAME [ARGS...]   (each bench's --help says its options)\n")
        for name, module in found.items():
            print(f"  {name:32s} {module.split('.')[1]:9s} {summary(module)[:90]}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in found:
        print(f"bench: no bench named {name!r}; `python -m bench` lists them", file=sys.stderr)
        return 2
    importlib.import_module("bench")  # the package first, so the bench's own imports resolve
    sys.argv = [found[name], *rest]
    runpy.run_module(found[name], run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
