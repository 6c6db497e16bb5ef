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

venv_script_args "$@"
venv_env

run python3 -m venv "$venv"
install_locked "$lock"

expect=0
for dir in "${lock_args[@]}"; do
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
  strip_debug_info < <(find "$venv" -type f -name '*.so*' -print0)
fi
# The venv's bytecode, hash-checked; pip's and ensurepip's .pyc files were stamped with extraction times.
compile_checked_hash "$venv/lib" "$venv/bin"
run hardlink --quiet --ignore-time "$venv"
# PyTorch's XPU wheels name pytorch-triton-xpu, which this image replaces with its own Triton.
if [[ $DRY_RUN -eq 0 ]]; then
  if ! problems="$("$venv/bin/pip" check 2>&1)"; then
    problems="$(grep -v 'pytorch-triton-xpu' <<<"$problems" || true)"
    if [[ -n "$problems" ]]; then echo "$problems" >&2; exit 1; fi
  fi
fi
