#!/usr/bin/env bash
# Compile xpukit's launch path (xpukit/runtime/ur/_launcher.c) for the image's python3 and check
# that it imports. Runs in its own build stage, so the compiler never reaches the runtime image.
#   build-launcher.sh SOURCE.c OUT_DIR
set -euo pipefail
if [[ $# -ne 2 ]]; then sed -n '2,4p' "$0"; exit 2; fi
src=$1
out=$2
python=${PYTHON:-python3}
suffix=$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
include=$("$python" -c 'import sysconfig; print(sysconfig.get_path("include"))')
mkdir -p "$out"
echo "+ gcc -O2 -shared -fPIC -I$include $src -o $out/_xpukit_launcher$suffix"
gcc -O2 -Wall -Werror -shared -fPIC -I"$include" "$src" -o "$out/_xpukit_launcher$suffix"
PYTHONPATH=$out "$python" -c 'import _xpukit_launcher as m; assert m.ABI == 1; print("build-launcher.sh: ok", m.__file__)'
