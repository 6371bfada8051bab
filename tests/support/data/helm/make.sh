#!/usr/bin/env bash
# Regenerate the HELM run files under tests/data/helm with the REAL HELM (crfm-helm), offline, on CPU.
# crfm-helm cannot share the project's environment (it pins datasets~=3.x, lighteval needs datasets>=4),
# so it runs from its own venv:  python3 -m venv /tmp/helmvenv &&
#   /tmp/helmvenv/bin/pip install -c constraints.txt torch==2.13.0 crfm-helm==0.5.16
# Its `simple/model1` client and the simple_* scenarios need no network and no weights.
set -euo pipefail
HELM_RUN="${HELM_RUN:-/tmp/helmvenv/bin/helm-run}"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
cd "$work"
"$HELM_RUN" --run-entries "simple_mcqa:model=simple/model1" --suite t --max-eval-instances 20 --output-path out --disable-cache
"$HELM_RUN" --run-entries "simple1:model=simple/model1" --suite t --max-eval-instances 6 --output-path out --disable-cache
for run in "simple_mcqa:model=simple_model1" "simple1:model=simple_model1"; do
  dest="$here/${run%%:*}"
  mkdir -p "$dest"
  cp "out/runs/t/$run/per_instance_stats.json" "out/runs/t/$run/scenario_state.json" "out/runs/t/$run/run_spec.json" "$dest/"
done
rm -rf "$work"
