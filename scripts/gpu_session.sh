#!/usr/bin/env bash
# On a lent GPU machine: the GPU checks of docs/cuda.md in one run that fits a device
# session (each step under its own time limit), logs and traces under $OUT (the device
# tool's output folder; ./gpu-results elsewhere), each step's last lines on stdout.
#   RLSCOPE_VENV=/opt/torch/.venv scripts/gpu_session.sh [check] [ppo] [calibrate]
# (default: all three; a device command runs at most 10 minutes, so run "check ppo"
# (at most ~8 min) and "calibrate" (at most ~10 min) as two calls on the warm machine).
# With .whl/ carried (scripts/gpu_prepare.sh), rlscope is installed from it first.
# RLSCOPE_GPU_DEVICE=cpu runs the same steps without a GPU (to try the script).
set -uo pipefail
cd "$(dirname "$0")/.."
VENV="${RLSCOPE_VENV:-.venv}"
PY="$VENV/bin/python"
DEV="${RLSCOPE_GPU_DEVICE:-cuda}"
RES="${OUT:-gpu-results}"
mkdir -p "$RES"
if [ -d .whl ] && ! "$PY" -c "import rlscope._native" 2>/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps .whl/*.whl
  # The tests import rlscope from the checkout: its native parts too.
  "$PY" - <<'PY'
import glob
import zipfile

z = zipfile.ZipFile(glob.glob(".whl/rlscope-*.whl")[0])
for n in z.namelist():
    if n.endswith((".so", "_descriptor.py")):
        z.extract(n, ".")
PY
fi
status=0
step() {  # step NAME SECONDS COMMAND...: run it into RES/NAME.log, print its tail
  local name=$1 limit=$2 t0 rc
  shift 2
  t0=$(date +%s)
  timeout "$limit" "$@" > "$RES/$name.log" 2>&1
  rc=$?
  echo "== $name: exit $rc in $(( $(date +%s) - t0 )) s (limit $limit s)"
  tail -n "${TAIL:-25}" "$RES/$name.log"
  [ "$rc" = 0 ] || status=1
}
wanted() { [ -z "$GROUPS_ASKED" ] || [[ " $GROUPS_ASKED " == *" $1 "* ]]; }
GROUPS_ASKED="$*"
# 1. The real-GPU suite and its summaries (scripts/gpu_check.sh).
if wanted check; then
  step gpu_check 300 scripts/gpu_check.sh 200
fi
# 2. PPO with its policy on the GPU: kernels per operation, sampled vs true GPU time.
if wanted ppo; then
  step ppo 120 "$VENV/bin/rls-prof" -o "$RES/ppo" --force -- \
    "$PY" examples/ppo_cartpole.py --device "$DEV" --total-steps 4096
  TAIL=60 step ppo_report 30 "$VENV/bin/rls-analyze" report "$RES/ppo"
  step ppo_plot 30 "$VENV/bin/rls-analyze" plot "$RES/ppo" -o "$RES/ppo/plots"
fi
# 3. Calibration with the CUDA collector (whole runs: CUDA does not survive fork).
if wanted calibrate; then
  TAIL=15 step calibrate 540 "$VENV/bin/rls-prof" -o "$RES/calibrate" --force \
    --calibrate --calibrate-by runs --repetitions 3 -- \
    "$PY" examples/ppo_cartpole.py --device "$DEV" --total-steps 2048
  TAIL=12 step calibrate_report 30 sh -c \
    "'$VENV/bin/rls-analyze' report '$RES/calibrate' | sed -n '1,/^Process/p'"
fi
exit "$status"
