#!/usr/bin/env bash
# The README's walkthrough, runnable as it is: a score-based coreset, a prediction, a backtest, a budget plan
# and a session on HELM Lite MATH (../shared/data), against a running service (./dev.sh serve).
#   bash examples/walkthrough.sh          # EVALPLAN_URL (default http://127.0.0.1:8000), EVALPLAN_DATA_DIR
set -euo pipefail
E=${EVALPLAN_URL:-http://127.0.0.1:8000}
D=${EVALPLAN_DATA_DIR:-../shared/data}/helm_lite_math/scores.csv
post() { curl -sSf -X POST "$E$1" -H 'content-type: application/json' -d "$2"; }
get() { curl -sSf "$E$1"; }
field() { python3 -c 'import json, sys; v = json.load(sys.stdin)
for k in sys.argv[1:]: v = v[int(k)] if k.isdigit() else v[k]
print(json.dumps(v) if isinstance(v, (dict, list)) else v)' "$@"; }
wait_job() {  # poll GET /v1/jobs/{id} until it ends; print its result
  while :; do
    job=$(get "/v1/jobs/$1"); status=$(echo "$job" | field status)
    case $status in succeeded) echo "$job" | field result; return ;; failed|cancelled) echo "$job"; return 1 ;; esac
    sleep 1
  done
}
scores_of() {  # '{"scores": [...]}' of the held-out model on the given item ids (from its row of the CSV)
  python3 -c 'import csv, json, sys
rows = list(csv.reader(open(sys.argv[1]))); head, row = rows[0], rows[-1]; value = dict(zip(head[1:], row[1:]))
print(json.dumps({"scores": [{"benchmark": "math", "item": i, "score": float(value[i])} for i in sys.argv[2:]]}))' "$D" "$@"
}

# 1. the reference models' scores: every model of the matrix but the last one, our "new checkpoint"
post /v1/benchmarks '{"name": "math", "capability": "math", "score_kind": "binary"}' | field id
curl -sSf -X POST "$E/v1/benchmarks/math/scores" -H 'content-type: text/csv' --data-binary @<(head -n -1 "$D"); echo
target=$(tail -n 1 "$D" | cut -d, -f1)

# 2. a score-based coreset of 10% of the items, and the new checkpoint's full score predicted from them
made=$(post /v1/coresets '{"method": "mrmr", "benchmarks": ["math"], "budget": {"fraction": 0.1}, "reference_models": "all"}')
wait_job "$(echo "$made" | field job id)" > /dev/null
coreset=$(echo "$made" | field coreset id)
items=$(get "/v1/coresets/$coreset" | python3 -c 'import json, sys; print(" ".join(i["item"] for i in json.load(sys.stdin)["items"]))')
post "/v1/coresets/$coreset/predict" "$(scores_of $items)" | field benchmarks math    # {estimate, interval}

# 3. how well would it have done? a backtest on held-out reference models, and the smallest budget for ±3 points
wait_job "$(post /v1/backtests '{"benchmarks": "math", "methods": ["random", "mrmr"], "budgets": [0.1], "seeds": 2}' | field job id)" \
  | python3 -c 'import json, sys; [print(r["method"], r["seed"], "rmse", round(r["rmse"], 4)) for r in json.load(sys.stdin)["rows"]]'
wait_job "$(post /v1/plans '{"benchmarks": ["math"], "half_width": 0.03, "methods": ["random", "mrmr"]}' | field job id)" \
  | field benchmarks math            # {method, budget, expected_rmse, ..., session: {items, vs_random, best_models, ...}}

# 4. a session: run the items it asks for (10 at a time), post their scores, until ±5 points at 95%
session=$(post /v1/sessions "{\"benchmark\": \"math\", \"target\": \"$target\", \"stop\": {\"half_width\": 0.05}, \"batch_size\": 10}")
while [ "$(echo "$session" | field status)" = active ]; do
  next=$(echo "$session" | field next_items | python3 -c 'import json, sys; print(" ".join(json.load(sys.stdin)))')
  obs=$(scores_of $next | python3 -c 'import json, sys; print(json.dumps({"observations": [{"item": s["item"], "score": s["score"]} for s in json.load(sys.stdin)["scores"]]}))')
  session=$(post "/v1/sessions/$(echo "$session" | field id)/observations" "$obs")
done
echo "$session" | python3 -c 'import json, sys; s = json.load(sys.stdin); print(s["method"], s["n_observed"], s["estimate"], s["ci"], s["stop_reason"])'
