#!/usr/bin/env bash
# Compile xpukit's launch path for the image's python3 and check that it imports: the UR launcher
# (xpukit/runtime/ur/_launcher.c -> _xpukit_launcher) and Triton's dispatch on it
# (xpukit/runtime/triton/_dispatch.c -> _xpukit_dispatch). Runs in its own build stage, so the
# compiler never reaches the runtime image.
#   build-launcher.sh [--dry-run] OUT_DIR SOURCE.c... (_NAME.c builds module _xpukit_NAME, with its
#   parts _NAME_PART.c; each source's folder is searched for headers, so _launcher.h sits beside _launcher.c)
set -euo pipefail

SCRIPT_NAME=build-launcher
# shellcheck source=SCRIPTDIR/common.sh
. "$(dirname "$0")/common.sh"

if [[ "${1:-}" == "--dry-run" ]]; then DRY_RUN=1; shift; fi
if [[ "${1:-}" == "--help" ]]; then sed -n '2,8p' "$0"; exit 0; fi
if [[ $# -lt 2 ]]; then sed -n '2,8p' "$0" >&2; die "build-launcher.sh takes OUT_DIR SOURCE.c..." "pass an output folder and the launch path's sources"; fi
out=$1
shift
python=${PYTHON:-python3}
suffix=$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
include=$("$python" -c 'import sysconfig; print(sysconfig.get_path("include"))')
run mkdir -p "$out"
# The same bytes from any checkout: each source's folder is mapped away (no build path in the binary's
# strings or debug info), and the build id is a hash of the content, never random (docs/reproducible.md).
# -flto: a module's parts are compiled as one program, so the per-launch calls between them are inlined
# (without it the split costs instructions per launch); -fvisibility=hidden: only PyInit_* is exported.
flags=(-O2 -flto -fvisibility=hidden -Wall -Werror -shared -fPIC "-Wl,--build-id=sha1" -I"$include")
declare -A seen_dirs=()
for src in "$@"; do
    dir=$(dirname "$src")
    [[ -n "${seen_dirs[$dir]:-}" ]] && continue
    seen_dirs[$dir]=1
    flags+=("-I$dir" "-ffile-prefix-map=$dir=.")
done
# A source is a module's main file (_NAME.c) unless another source's name is a prefix of it
# followed by "_" (_dispatch_key.c is a part of _dispatch.c's module).
declare -A parts=()
mains=()
for src in "$@"; do
    name=$(basename "$src" .c)
    [[ "$name" == _* ]] || die "build-launcher.sh: $src is not named _NAME.c" "name the source after its module (_launcher.c -> _xpukit_launcher)"
    main=""
    for other in "$@"; do
        o=$(basename "$other" .c)
        if [[ "$o" != "$name" && "$name" == "${o}_"* && ${#o} -gt ${#main} ]]; then main=$o; fi
    done
    if [[ -n "$main" ]]; then parts[$main]+=" $src"; else mains+=("$src"); fi
done
modules=()
for src in "${mains[@]}"; do
    name=$(basename "$src" .c)
    # shellcheck disable=SC2086 # the parts are a space-separated list of paths without spaces
    run gcc "${flags[@]}" "$src" ${parts[$name]:-} -o "$out/_xpukit$name$suffix"
    modules+=("_xpukit$name")
done
# shellcheck disable=SC2016 # python code, not shell
run env PYTHONPATH="$out" "$python" -c 'import importlib, sys
for name in sys.argv[1:]:
    m = importlib.import_module(name)
    print("build-launcher.sh: ok", name, "ABI", m.ABI, m.__file__)' "${modules[@]}"
