#!/usr/bin/env bash
# Here, with a package index: what a lent GPU machine without network needs to run
# scripts/gpu_session.sh — an rlscope wheel for its Python (3.12; the CUDA collector
# built against this machine's CUDA 13 headers) and the demo's pure-Python dependencies
# the machine's image lacks, in .whl/ (ignored by git: name it in the device tool's
# carry). See docs/cuda.md.
#   scripts/gpu_prepare.sh            (RLSCOPE_WHEEL_PYTHON: a Python of the machine's version)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${RLSCOPE_WHEEL_PYTHON:-$HOME/.pyenv/versions/3.12.1/bin/python}"
rm -rf .whl
mkdir .whl
"$PY" -m pip wheel -q --no-deps -w .whl .
"$PY" -m pip download -q --no-deps --only-binary=:all: -d .whl gymnasium==1.2.2 farama-notifications
ls -l .whl
