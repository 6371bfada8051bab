#!/usr/bin/env bash
# The README's "CI loop" from a shell, runnable as it is after examples/ci_loop.py (MuSR's reference models and a
# session of the earlier checkpoint my-ckpt-122 on the server): one session driven by the `evalplan` command alone.
#   bash examples/session_cli.sh          # EVALPLAN_URL (default http://127.0.0.1:8000), EVALPLAN_DATA_DIR
# README.md shows this file from the marker line on (tests/deploy/test_readme_ci_loop.py checks that, and runs it).
set -euo pipefail
D=${EVALPLAN_DATA_DIR:-../shared/data}/openllm_v2_musr/scores.csv
run_my_model() {  # the model's score on item $1: here the real one of the matrix's last model (yours runs the model)
  python3 -c 'import csv, sys
rows = list(csv.reader(open(sys.argv[1]))); print(dict(zip(rows[0], rows[-1]))[sys.argv[2]])' "$D" "$1"
}

# ---- README.md "CI loop" shows the rest of this file ----
export EVALPLAN_URL=${EVALPLAN_URL:-http://127.0.0.1:8000}             # or --url URL on each command
field() { python3 -c 'import json, sys; s = json.load(sys.stdin); print(s[sys.argv[1]] or "")' "$@"; }
session=$(evalplan session create --benchmark musr --target my-ckpt-123 --stop-half-width 0.02 \
          --previous my-ckpt-122 --max-items 5)                         # each command prints the session as JSON
id=$(echo "$session" | field id)
while [ "$(echo "$session" | field status)" = active ]; do
  item=$(echo "$session" | python3 -c 'import json, sys; print(json.load(sys.stdin)["next_items"][0])')
  session=$(evalplan session observe "$id" "$item" "$(run_my_model "$item")")   # the model's score on the item
done
evalplan session show "$id"                                             # estimate, ci, stop_reason, ...
