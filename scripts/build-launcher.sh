#!/usr/bin/env bash
# Compile xpukit's launch path (xpukit/runtime/ur/_launcher.c) for the image's python3 and check
# that it imports. Runs in its own build stage, so the compiler never reaches the runtime image.
#   build-launcher.sh [--dry-run] SOURCE.c OUT_DIR
set -euo pipefail

SCRIPT_NAME=build-launcher
# shellcheck source=SCRIPTDIR/common.sh
. "$(dirname "$0")/common.sh"

if [[ "${1:-}" == "--dry-run" ]]; then DRY_RUN=1; shift; fi
if [[ "${1:-}" == "--help" ]]; then sed -n '2,4p' "$0"; exit 0; fi
if [[ $# -ne 2 ]]; then sed -n '2,4p' "$0" >&2; die "build-launcher.sh takes SOURCE.c OUT_DIR" "pass the launcher's source and an output folder"; fi
src=$1
out=$2
python=${PYTHON:-python3}
suffix=$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
include=$("$python" -c 'import sysconfig; print(sysconfig.get_path("include"))')
run mkdir -p "$out"
# The same bytes from any checkout: the source's folder is mapped away (no build path in the binary's
# strings or debug info), and the build id is a hash of the content, never random (docs/reproducible.md).
flags=(-O2 -Wall -Werror -shared -fPIC "-ffile-prefix-map=$(dirname "$src")=." "-Wl,--build-id=sha1")
run gcc "${flags[@]}" -I"$include" "$src" -o "$out/_xpukit_launcher$suffix"
# shellcheck disable=SC2016 # python code, not shell
run env PYTHONPATH="$out" "$python" -c 'import _xpukit_launcher as m; assert m.ABI == 3; print("build-launcher.sh: ok", m.__file__)'
