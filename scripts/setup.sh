#!/usr/bin/env bash
# Create .venv (if missing), install the build tools and rlscope with the given extras,
# and build the native part. Used by demo.sh and test.sh; safe to run again.
#   scripts/setup.sh demo        scripts/setup.sh test
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-demo}"
VENV="${RLSCOPE_VENV:-.venv}"
log() { printf '[setup] %s\n' "$*" >&2; }

# System packages the build needs (a C++17 compiler); installed only when missing.
if ! command -v g++ >/dev/null 2>&1; then
  log "installing g++ (apt)"
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq g++ >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq g++ >/dev/null; fi
fi

PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV"
  "$PY" -m venv "$VENV"
fi
pip() { "$VENV/bin/python" -m pip "$@"; }
pip install -q --upgrade pip
# Build tools in the venv so builds need no network-isolated build environment.
pip install -q "scikit-build-core>=0.10" "grpcio-tools==1.85.1" ninja "cmake>=3.20"
# torch first and pinned: a range alone could fetch a multi-GB CUDA build.
case ",$extras," in
  *,demo,*|*,test,*|*,torch,*|*,sb3,*|*,rllib,*) pip install -q "torch==2.13.0" ;;
esac
# A second venv builds in its own directory (CMake caches the interpreter it found).
build=()
[ "$VENV" = .venv ] || build=(-C "build-dir=build/$(basename "$VENV")/{wheel_tag}")
log "installing rlscope[$extras] into $VENV (builds the native extension)"
pip install -q --no-build-isolation "${build[@]}" -e ".[$extras]"
"$VENV/bin/python" -c "import rlscope._native, rlscope.trace.messages" \
  || { log "the native extension did not build; see the pip output above"; exit 1; }
log "ready: $VENV"
