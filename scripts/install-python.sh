#!/usr/bin/env bash
# Create the kit's venv and install the hash-locked requirements, then any wheels built in
# earlier stages (the xpu profile's Triton and PyTorch).
#   install-python.sh [--dry-run] LOCK_FILE [[--expect] WHEEL_DIR...]
# --expect: the folder must hold wheels (its stage built them); an empty one is an error, never a
# venv without them (buildah 1.28 mounts nothing from a stage that comes from its layer cache).
# Wheels are kept in a wheelhouse on a BuildKit cache mount: pip's own HTTP cache stays empty
# behind proxies that drop caching headers, a wheelhouse does not.
set -euo pipefail

SCRIPT_NAME=install-python
# shellcheck source=SCRIPTDIR/common.sh
. "$(dirname "$0")/common.sh"

if [[ "${1:-}" == "--dry-run" ]]; then DRY_RUN=1; shift; fi
if [[ "${1:-}" == "--help" || $# -lt 1 ]]; then sed -n '2,8p' "$0"; exit 0; fi
lock="$1"; shift
# The venv's path is the image layout's (xpukit/layout.py), passed by invoke build as a build arg.
[[ -n "${XPUKIT_VENV:-}" ]] || die "XPUKIT_VENV is not set" "set XPUKIT_VENV to the venv's path (invoke build passes it)"
venv=$XPUKIT_VENV
wheelhouse="${XPUKIT_WHEELHOUSE:-/run/xpukit-wheelhouse}"  # the Dockerfile's cache mount target

use_ca_bundle
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_PROGRESS_BAR=off
# No bytecode as a side effect: a download imports stdlib modules (netrc) whose .pyc the system
# python would then write into the layer only when the wheelhouse was empty. The venv's .pyc files
# are written below, on purpose and hash-checked.
export PYTHONDONTWRITEBYTECODE=1

run python3 -m venv "$venv"
run mkdir -p "$wheelhouse"
# Offline first: everything already in the wheelhouse installs with no index at all.
if ! run "$venv/bin/pip" install -q --require-hashes --no-deps --only-binary=:all: \
      --no-index --find-links "$wheelhouse" -r "$lock" 2>/dev/null; then
  note "the wheelhouse lacks some locked wheels; downloading them"
  run "$venv/bin/pip" download -q --require-hashes --no-deps --only-binary=:all: -d "$wheelhouse" -r "$lock"
  run "$venv/bin/pip" install -q --require-hashes --no-deps --only-binary=:all: \
      --no-index --find-links "$wheelhouse" -r "$lock"
fi

expect=0
for dir in "$@"; do
  if [[ "$dir" == "--expect" ]]; then expect=1; continue; fi
  [[ -n "$dir" ]] || continue  # the Dockerfile passes "" where a folder is optional
  shopt -s nullglob
  wheels=("$dir"/*.whl)
  shopt -u nullglob
  if [[ ${#wheels[@]} -gt 0 ]]; then
    run "$venv/bin/pip" install -q --no-deps "${wheels[@]}"
  elif [[ $expect -eq 1 && $DRY_RUN -eq 0 ]]; then
    die "no wheels in $dir, though its stage builds them (an engine that mounted nothing from a cached stage)" \
      "invoke clean --build-cache, then build again (docs/reproducible.md)"
  fi
  expect=0
done

# What every pull pays for but no Intel target uses, removed in this same layer (a later layer
# could only hide it):
# - Triton's NVIDIA and AMD backends (CUDA's ptxas, cupti, ROCm's tools; about 190 MiB);
# - DWARF in the shared objects (libtriton.so carries about 240 MiB): symbol names stay, so
#   backtraces still name functions;
# - identical copies of large .so files: wheels cannot carry symlinks, and pip stamps each copy
#   with its own extraction time, so the comparison ignores timestamps (about 290 MiB).
if [[ $DRY_RUN -eq 1 ]]; then
  note "rm -rf every triton/backends/* but intel"
  note "strip --strip-debug every .so under $venv with a .debug_info section"
else
  shopt -s nullglob
  for backend in "$venv"/lib/python3*/site-packages/triton/backends/*/; do
    case "$(basename "$backend")" in intel|__pycache__) ;; *) run rm -rf "$backend" ;; esac
  done
  shopt -u nullglob
  while IFS= read -r -d '' object; do
    # grep reads all of readelf's output: with -q it would stop early, readelf would die of SIGPIPE,
    # and under pipefail the test would fail at random (some builds stripped, others not).
    if readelf --section-headers --wide "$object" 2>/dev/null | grep ' \.debug_info ' >/dev/null; then
      run strip --strip-debug "$object"
    fi
  done < <(find "$venv" -type f -name '*.so*' -print0)
fi
# Bytecode that does not depend on when the build ran: pip and ensurepip write .pyc files stamped with
# each source's extraction time; these are rewritten to check the source's hash instead
# (docs/reproducible.md). -j0 uses every core; the result does not depend on the order.
run "$venv/bin/python" -m compileall -q -f -j0 --invalidation-mode checked-hash "$venv/lib" "$venv/bin"
run hardlink --quiet --ignore-time "$venv"
# PyTorch's XPU wheels name pytorch-triton-xpu, which this image replaces with its own Triton.
if [[ $DRY_RUN -eq 0 ]]; then
  if ! problems="$("$venv/bin/pip" check 2>&1)"; then
    problems="$(grep -v 'pytorch-triton-xpu' <<<"$problems" || true)"
    if [[ -n "$problems" ]]; then echo "$problems" >&2; exit 1; fi
  fi
fi
