#!/usr/bin/env bash
# Evalplan developer entry point.
#   ./dev.sh serve   set up .venv and run the service on its embedded defaults
#                    (SQLite file ./evalplan.db, in-process jobs, packaged embedding model)
#                    at http://127.0.0.1:8000 (OpenAPI docs at /docs)
#   ./dev.sh test    set up .venv and run the whole test suite (real PostgreSQL + Redis + a Celery worker)
#   ./dev.sh lint    set up .venv and run the lint and type gates (ruff, mypy), as CI does first
#   ./dev.sh setup   only set up .venv
set -euo pipefail
cd "$(dirname "$0")"

VENV="${EVALPLAN_VENV:-.venv}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PIP_DISABLE_PIP_VERSION_CHECK=1

python_bin() {
  if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; return; fi
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1; then echo "$candidate"; return; fi
  done
  echo "evalplan: Python 3.11+ is required" >&2; exit 1
}

setup() {
  if [ ! -x "$VENV/bin/python" ]; then
    "$(python_bin)" -m venv "$VENV"
  fi
  local stamp="$VENV/.evalplan-installed"
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ]; then
    # torch first, from the pin in constraints.txt (a CPU wheel); every later install keeps the pin.
    "$VENV/bin/pip" install -q -c constraints.txt "torch==2.13.0"
    "$VENV/bin/pip" install -q -c constraints.txt -e ".[test]"
    touch "$stamp"
  fi
}

command="${1:-}"
[ $# -gt 0 ] && shift
case "$command" in
  setup) setup ;;
  serve) setup; exec "$VENV/bin/evalplan" serve --host "${EVALPLAN_HOST:-127.0.0.1}" --port "${EVALPLAN_PORT:-8000}" "$@" ;;
  test)  setup; exec "$VENV/bin/python" -m pytest "$@" ;;
  lint)  setup; "$VENV/bin/ruff" check . && exec "$VENV/bin/mypy" ;;
  *) echo "usage: ./dev.sh serve|test|lint|setup" >&2; exit 2 ;;
esac
