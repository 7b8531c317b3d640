#!/usr/bin/env bash
# Create .venv (if missing), install the build tools and rlscope with the given extras,
# and build the native part. Used by demo.sh and test.sh; safe to run again (then every
# step takes seconds). Each step says what it does and how long it took, on stderr.
#   scripts/setup.sh demo        scripts/setup.sh test
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-demo}"
VENV="${RLSCOPE_VENV:-.venv}"
log() { printf '[setup] %s\n' "$*" >&2; }
took() {  # seconds -> "47 s" or "1 min 22 s"
  if [ "$1" -lt 60 ]; then echo "$1 s"; else echo "$(($1 / 60)) min $(($1 % 60)) s"; fi
}
# step "what it does" command...: one line before, one with its duration after.
step() {
  local what=$1 t=$SECONDS
  shift
  log "$what ..."
  "$@" || { log "failed after $(took $((SECONDS - t))): $what"; return 1; }
  log "  done in $(took $((SECONDS - t)))"
}
start=$SECONDS

# System packages the build needs (a C++17 compiler); installed only when missing.
apt_gxx() {
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq g++ >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq g++ >/dev/null; fi
}
if ! command -v g++ >/dev/null 2>&1; then
  step "installing g++ with apt (the C++ compiler the native extension needs)" apt_gxx
fi

# tmux for the tests: the live view's test drives rls-analyze live in a real terminal
# (tests/integration/test_live_view.py; it skips without tmux).
apt_tmux() {
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq tmux >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq tmux >/dev/null; fi
}
case ",$extras," in
  *,test,*) if ! command -v tmux >/dev/null 2>&1; then
      step "installing tmux with apt (the live view's terminal test)" apt_tmux \
        || log "tmux not installed: tests/integration/test_live_view.py will skip"
    fi ;;
esac

# A full disk shows up as failed or cut downloads deep in pip's output: say it first. A
# new venv with the test extras takes ~5 GB (torch, TensorFlow, JAX), the RLlib one ~2 GB.
if [ ! -x "$VENV/bin/python" ]; then
  free_kb=$(df -Pk . | awk 'NR == 2 {print $4}')
  if [ -n "$free_kb" ] && [ "$free_kb" -lt $((6 * 1024 * 1024)) ]; then
    log "warning: only $((free_kb / 1024)) MB free here; a new $VENV needs up to ~5 GB (free some space if the install fails)"
  fi
fi
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  step "creating the virtual environment $VENV" "$PY" -m venv "$VENV"
fi
pip() { "$VENV/bin/python" -m pip "$@"; }
# pip install that survives a flaky index or CDN: pip resumes a cut download itself
# (--resume-retries), and a whole install that still fails is tried again twice (the
# wheels already fetched come from pip's cache then).
pip_install() {
  local attempt resume=()
  # A venv's bundled pip may predate --resume-retries (pip 25.1); the upgrade goes without.
  case "$(pip install --help 2>/dev/null)" in *--resume-retries*) resume=(--resume-retries 20) ;; esac
  for attempt in 1 2 3; do
    pip install --retries 10 "${resume[@]}" "$@" && return 0
    [ "$attempt" = 3 ] || { log "  pip install failed (attempt $attempt of 3); retrying in $((attempt * 15)) s"; sleep $((attempt * 15)); }
  done
  return 1
}
step "updating pip in $VENV" pip_install -q --upgrade pip
# Build tools in the venv so builds need no network-isolated build environment.
step "installing the build tools (scikit-build-core, grpcio-tools, ninja, cmake)" \
  pip_install -q "scikit-build-core>=0.10" "grpcio-tools==1.85.1" ninja "cmake>=3.20"
# torch first and pinned: a range alone could fetch a multi-GB CUDA build.
case ",$extras," in
  *,demo,*|*,test,*|*,torch,*|*,sb3,*|*,rllib,*)
    step "installing torch 2.13.0 (~1-2 min the first time)" pip_install -q "torch==2.13.0" ;;
esac
# A second venv builds in its own directory (CMake caches the interpreter it found).
build=()
[ "$VENV" = .venv ] || build=(-C "build-dir=build/$(basename "$VENV")/{wheel_tag}")
step "installing rlscope[$extras] and building its native extension (~1-2 min the first time)" \
  pip_install -q --no-build-isolation "${build[@]}" -e ".[$extras]"
"$VENV/bin/python" -c "import rlscope._native, rlscope.trace.messages" \
  || { log "the native extension did not build; see the pip output above"; exit 1; }
log "ready: $VENV (set-up took $(took $((SECONDS - start))))"
