#!/usr/bin/env bash
# The test suite as CI runs it, on a fresh clone, with two busy loops beside it: the check
# that the suite survives a loaded 2-core machine (docs/developers.md). Nothing else
# should run meanwhile (~85 min here: ~15 min of set-up, ~70 of tests).
#   scripts/hog_run.sh [DIR]      (DIR: where to clone; default /tmp/rlscope-hog-run)
# The log is DIR.log; its last line is "RC=<exit status> seconds=<wall time>".
set -uo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-/tmp/rlscope-hog-run}"
log="$dir.log"
rm -rf "$dir"
git clone -q "$src" "$dir" || exit 1
cd "$dir" || exit 1
git log --oneline -1 > "$log"
hogs=()
for _ in 1 2; do
  sh -c 'while :; do :; done' &
  hogs+=($!)
done
trap 'kill "${hogs[@]}" 2>/dev/null' EXIT INT TERM
start=$(date +%s)
CI=true bash .ci/run >> "$log" 2>&1
rc=$?
echo "RC=$rc seconds=$(( $(date +%s) - start ))" >> "$log"
exit "$rc"
