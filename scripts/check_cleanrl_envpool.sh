#!/usr/bin/env bash
# CleanRL's EnvPool PPO script, unmodified, under rls-prof: the three operations with no
# code change (issue 23; docs/attribution.md#supported-env-libraries). The script is
# CleanRL's, not ours: pass your copy of cleanrl/ppo_atari_envpool.py
# (https://github.com/vwxyzjn/cleanrl). It needs the old gym API, so this builds its own
# virtual environment: envpool 0.8.4, gym 0.23.1, numpy<2, tyro, tensorboard, torch
# 2.13.0 and rlscope from this checkout.
#   scripts/check_cleanrl_envpool.sh PATH/TO/ppo_atari_envpool.py [OUT_DIR]
# Last line: RESULT simulation_calls=... inference_calls=... backprop_calls=... ok=1|0
set -euo pipefail
cd "$(dirname "$0")/.."
script="${1:-}"
if [ -z "$script" ] || [ ! -f "$script" ]; then
  echo "check_cleanrl_envpool: give the path of CleanRL's ppo_atari_envpool.py (from https://github.com/vwxyzjn/cleanrl)" >&2
  exit 2
fi
out="${2:-$(mktemp -d)/cleanrl}"
venv="${RLSCOPE_CLEANRL_VENV:-/tmp/rlscope-cleanrl-venv}"
if [ ! -x "$venv/bin/rls-prof" ]; then
  echo "[check] building $venv (envpool 0.8.4, gym 0.23.1, torch 2.13.0, rlscope) ..." >&2
  python3.11 -m venv "$venv"
  "$venv/bin/pip" install -q torch==2.13.0
  "$venv/bin/pip" install -q "numpy<2" envpool==0.8.4 gym==0.23.1 tyro tensorboard
  "$venv/bin/pip" install -q .
fi
# 2 PPO iterations of 8 envs x 128 steps: 256 vector steps (+ the reset), 256 forwards.
# Run from a scratch directory: the script writes its TensorBoard logs under ./runs.
script="$(realpath "$script")"
rm -rf "$out" "$out.cwd"
mkdir -p "$out.cwd"
(cd "$out.cwd" && OMP_NUM_THREADS=1 "$venv/bin/rls-prof" -o "$out" -q -- \
  "$venv/bin/python" "$script" --total-timesteps 2048 --num-envs 8 --num-steps 128 \
  --update-epochs 2 --no-cuda --exp-name rlscope-check >/dev/null)
# (from the scratch directory too: the checkout's rlscope/ is not the one installed)
cd "$out.cwd"
"$venv/bin/python" - "$out" <<'PY'
import sys

import rlscope.analysis

ops = rlscope.analysis.load(sys.argv[1]).operations()
main = ops[ops["pid"] == ops["pid"].iloc[0]].set_index("operation")
sim, inf, bp = (main.loc[n] if n in main.index else None
                for n in ("simulation", "inference", "backprop"))
ok = (sim is not None and inf is not None and bp is not None
      and sim["calls"] == 257 and inf["calls"] == 256 and bp["calls"] == 2
      and sim["simulator_s"] > 0.5 * sim["self_s"])
print(main[["calls", "wall_s", "self_s", "python_s", "backend_s", "simulator_s"]]
      .to_string())
print(f"RESULT simulation_calls={int(sim['calls']) if sim is not None else 0} "
      f"inference_calls={int(inf['calls']) if inf is not None else 0} "
      f"backprop_calls={int(bp['calls']) if bp is not None else 0} ok={int(bool(ok))}")
sys.exit(0 if ok else 1)
PY
