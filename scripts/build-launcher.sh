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
# The same bytes from any checkout: the source's folder is mapped away (no build path in the binary's
# strings or debug info), and the build id is a hash of the content, never random (docs/reproducible.md).
flags=(-O2 -Wall -Werror -shared -fPIC "-ffile-prefix-map=$(dirname "$src")=." "-Wl,--build-id=sha1")
echo "+ gcc ${flags[*]} -I$include $src -o $out/_xpukit_launcher$suffix"
gcc "${flags[@]}" -I"$include" "$src" -o "$out/_xpukit_launcher$suffix"
PYTHONPATH=$out "$python" -c 'import _xpukit_launcher as m; assert m.ABI == 2; print("build-launcher.sh: ok", m.__file__)'
