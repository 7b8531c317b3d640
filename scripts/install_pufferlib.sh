#!/usr/bin/env bash
# PufferLib 3.0.0 into a venv, for its tests (tests/integration/test_pufferlib.py).
#   scripts/install_pufferlib.sh [VENV]      (default: $RLSCOPE_VENV or .venv)
#
# pip cannot install it here: its one release is a source archive whose setup.py
# downloads C libraries (box2d) from GitHub while it builds, and its NO_OCEAN switch fails
# (NameError). So this takes the archive from the package index (sha256 checked, cached
# in build/pufferlib/), copies its Python package into the venv's site-packages, and
# compiles three of its native C envs (ocean/cartpole, squared, pong) from their own
# sources with the raylib the archive bundles. Its other native envs are left out (each
# is one more compile of its binding.c, as below). The Python dependencies it uses (numpy, gymnasium, psutil) are the test extras'.
# Safe to run again; the tests that need it skip without it.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-${RLSCOPE_VENV:-.venv}}"
PY="$(cd "$VENV" && pwd)/bin/python"
VERSION=3.0.0
URL="https://files.pythonhosted.org/packages/7c/e1/5292f9b69c6263707b40ba04a87e6b9bcc177281d31092f77afd90c412f1/pufferlib-$VERSION.tar.gz"
SHA256=7df3a3e3f5f894d78d2a1f5374097890aec01473183e748abefe4f3faa10eaa9
cache="build/pufferlib"
src="$cache/pufferlib-$VERSION"
mkdir -p "$cache"

# Imports run in the cache: PufferLib's __init__ links "resources" into the cwd.
ENVS="cartpole squared pong"
imports() { (cd "$cache" && "$PY" -c "from pufferlib.ocean.cartpole.cartpole import Cartpole
from pufferlib.ocean.squared.squared import Squared
from pufferlib.ocean.pong.pong import Pong" 2>/dev/null); }
if imports; then
  exit 0  # installed already
fi
# Download and unpack with the venv's Python (no curl or tar options to rely on).
"$PY" - "$URL" "$SHA256" "$cache" "$VERSION" <<'EOF'
import hashlib, os, socket, sys, tarfile, urllib.request
url, sha, cache, version = sys.argv[1:]
socket.setdefaulttimeout(60)  # a stalled download fails instead of hanging the set-up
archive = os.path.join(cache, f"pufferlib-{version}.tar.gz")
ok = os.path.exists(archive) and hashlib.sha256(open(archive, "rb").read()).hexdigest() == sha
if not ok:
    tmp = archive + ".part"
    urllib.request.urlretrieve(url, tmp)
    got = hashlib.sha256(open(tmp, "rb").read()).hexdigest()
    if got != sha:
        sys.exit(f"pufferlib-{version}.tar.gz: sha256 {got}, expected {sha}")
    os.replace(tmp, archive)
top = f"pufferlib-{version}/"
keep = (top + "pufferlib/", top + "raylib-5.5_linux_amd64/", top + "LICENSE")
with tarfile.open(archive) as t:
    members = [m for m in t.getmembers() if m.name.startswith(keep)]
    try:
        t.extractall(cache, members=members, filter="data")
    except TypeError:  # Python without extraction filters (< 3.11.4)
        t.extractall(cache, members=members)
EOF
site="$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")"
rm -rf "$site/pufferlib"
cp -r "$src/pufferlib" "$site/pufferlib"
cp "$src/LICENSE" "$site/pufferlib/LICENSE"
inc="$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['include'])")"
np_inc="$("$PY" -c "import numpy; print(numpy.get_include())")"
ext="$("$PY" -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")"
cc="${CC:-gcc}"
command -v "$cc" >/dev/null || cc=cc
for env in $ENVS; do
  "$cc" -shared -fPIC -O2 -I"$inc" -I"$np_inc" -I"$src/raylib-5.5_linux_amd64/include" \
    "$src/pufferlib/ocean/$env/binding.c" "$src/raylib-5.5_linux_amd64/lib/libraylib.a" \
    -lm -o "$site/pufferlib/ocean/$env/binding$ext"
done
imports || { echo "pufferlib $VERSION: installed, but its C envs ($ENVS) do not import" >&2
             exit 1; }
echo "pufferlib $VERSION installed in $VENV (Python package + its C envs: $ENVS)" >&2
