#!/usr/bin/env bash
# Set everything up and run a real profiled demo end to end: a PPO CartPole training
# loop written with PyTorch, annotated with rlscope, run under rls-prof, calibrated (so
# the report has rlscope's own overhead removed, docs/overhead-correction.md), reported.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh demo
VENV="${RLSCOPE_VENV:-.venv}"
OUT="${RLSCOPE_DEMO_OUT:-runs/demo-ppo-cartpole}"
export OMP_NUM_THREADS=1
echo "[demo] training PPO on CartPole under rls-prof, then calibrating rlscope's own" \
  "overhead (rls-prof says where it is)" >&2
"$VENV/bin/rls-prof" -o "$OUT" --force --calibrate --chunks 16 -- \
  "$VENV/bin/python" examples/ppo_cartpole.py "$@"
echo
echo "[demo] the report (rls-analyze report $OUT):" >&2
"$VENV/bin/rls-analyze" report "$OUT"
echo
echo "Trace: $OUT   (more: $VENV/bin/rls-analyze dump $OUT | less)"
