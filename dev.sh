#!/usr/bin/env bash
# Evalplan developer entry point.
#   ./dev.sh serve   set up .venv and run the service on its embedded defaults
#                    (SQLite file ./evalplan.db, in-process jobs, packaged embedding model)
#                    at http://127.0.0.1:8000 (OpenAPI docs at /docs)
#   ./dev.sh test    set up .venv and run the whole test suite (real PostgreSQL + Redis + a Celery worker
#                    + headless Chromium for the pages; as root it apt-installs Debian's chromium once)
#   ./dev.sh lint    set up .venv and run the lint and type gates (ruff, mypy), as CI does first
#   ./dev.sh setup   only set up .venv
#   ./dev.sh run CMD run CMD with the venv's python and evalplan first on PATH (set up with the [worker,harness]
#                    extras: the README's examples, inspect and lm-eval included), from a shell without the venv
set -euo pipefail
cd "$(dirname "$0")"

VENV="${EVALPLAN_VENV:-.venv}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# The browser tests drive Debian's chromium through playwright; playwright never fetches a browser.
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1

python_bin() {
  if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; return; fi
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1; then echo "$candidate"; return; fi
  done
  echo "evalplan: Python 3.11+ is required" >&2; exit 1
}

# setup EXTRAS: the service needs [worker] on its embedded defaults (in-process jobs compute embeddings);
# the tests need [worker,harness,test]. Each set of extras has its own stamp, so `serve` never installs tests.
setup() {
  local extras="${1:-worker,harness,test}"
  if [ ! -x "$VENV/bin/python" ]; then
    "$(python_bin)" -m venv "$VENV"
  fi
  local stamp="$VENV/.evalplan-installed-${extras//,/-}"
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ]; then
    # torch first, from the pin in constraints.txt (a CPU wheel); every later install keeps the pin.
    "$VENV/bin/pip" install -q -c constraints.txt "torch==2.13.0"
    "$VENV/bin/pip" install -q -c constraints.txt -e ".[$extras]"
    touch "$stamp"
  fi
}

# Debian's chromium for the browser tests (tests/browser.py). Quick no-op once installed; as root
# it installs it with apt-get (~30-60 s once); otherwise the browser tests fail with this hint.
ensure_chromium() {
  if [ -n "${EVALPLAN_TEST_CHROMIUM:-}" ] || command -v chromium >/dev/null 2>&1; then return 0; fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "evalplan: installing Debian's chromium for the browser tests" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
  else
    echo "evalplan: the browser tests need Debian's chromium: sudo apt-get install -y chromium" >&2
  fi
}

command="${1:-}"
[ $# -gt 0 ] && shift
case "$command" in
  setup) setup ;;
  serve) setup worker; exec "$VENV/bin/evalplan" serve --host "${EVALPLAN_HOST:-127.0.0.1}" --port "${EVALPLAN_PORT:-8000}" "$@" ;;
  test)  setup; ensure_chromium
         # both cores by default (pytest-xdist; each worker has its own PostgreSQL database and Redis db);
         # -n N on the command line, or EVALPLAN_TEST_WORKERS=N, overrides it (0: one process)
         workers=(-n "${EVALPLAN_TEST_WORKERS:-2}")
         for arg in "$@"; do case "$arg" in -n|-n*|--numprocesses*|no:xdist|-pno:xdist) workers=() ;; esac; done
         exec "$VENV/bin/python" -m pytest "${workers[@]}" "$@" ;;
  run)   # a README command from a fresh shell: the venv's python and evalplan first on PATH, no activation
         [ -f "$VENV/.evalplan-installed-worker-harness-test" ] && [ "$VENV/.evalplan-installed-worker-harness-test" -nt pyproject.toml ] \
           || setup worker,harness
         [ $# -gt 0 ] || { echo "usage: ./dev.sh run COMMAND [ARGS...]" >&2; exit 2; }
         case "$VENV" in /*) venv_dir="$VENV" ;; *) venv_dir="$PWD/$VENV" ;; esac
         PATH="$venv_dir/bin:$PATH" VIRTUAL_ENV="$venv_dir" exec "$@" ;;
  lint)  setup; "$VENV/bin/ruff" check . && exec "$VENV/bin/mypy" ;;
  *) echo "usage: ./dev.sh serve|test|lint|setup|run COMMAND..." >&2; exit 2 ;;
esac
