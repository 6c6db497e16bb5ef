#!/usr/bin/env bash
# Install an optional layer's hash-locked requirements into the kit's venv (`invoke build --with
# NAME`, the Dockerfile's layer stages), then slim what it added as install-python.sh slims the venv.
# The lock holds the image's own packages at their locked versions (already installed: skipped) plus
# the layer's; wheels come from the wheelhouse cache mount, downloaded only when missing.
#   install-layer.sh [--dry-run] LOCK_FILE
# Only the files the install adds are stripped, byte-compiled and hard-linked: touching one of the
# image's own files would copy it whole into this layer.
set -euo pipefail

SCRIPT_NAME=install-layer
# shellcheck source=SCRIPTDIR/common.sh
. "$(dirname "$0")/common.sh"

venv_script_args "$@"
[[ ${#lock_args[@]} -eq 0 ]] || die "unexpected arguments after $lock: ${lock_args[*]}" \
  "pass only the layer's lock file (the files to slim are the ones the install adds)"
venv_env

if [[ $DRY_RUN -eq 1 ]]; then
  install_locked "$lock"
  note "strip --strip-debug, compileall --invalidation-mode checked-hash and hardlink --ignore-time: the files the install added"
  exit 0
fi

# The venv's files before and after, NUL-separated and sorted; the lists live outside the venv and
# leave with this process.
lists=$(mktemp -d)
trap 'rm -rf "$lists"' EXIT
venv_files() { find "$venv" -type f -print0 | LC_ALL=C sort -z; }
venv_files >"$lists/before"
install_locked "$lock"
venv_files >"$lists/after"
mapfile -d '' added < <(LC_ALL=C comm -z -13 "$lists/before" "$lists/after")
note "the layer added ${#added[@]} files"
[[ ${#added[@]} -gt 0 ]] || exit 0

# As install-python.sh does for the venv: no DWARF (oneAPI's libomptarget.so carries 44 MiB), hash-
# checked bytecode (pip stamped its .pyc files with extraction times, also the two gdb helper
# scripts oneAPI's SYCL runtime puts in lib/), then one inode per content (libsycl-jit.so's two
# 238 MiB copies: wheels cannot carry symlinks).
strip_debug_info < <(printf '%s\0' "${added[@]}")
printf '%s\0' "${added[@]}" | { grep -z '\.py$' || true; } | tr '\0' '\n' >"$lists/sources"
if [[ -s "$lists/sources" ]]; then
  compile_checked_hash -i "$lists/sources"
fi
# Listed again: compileall replaced the .pyc files it rewrote (new inodes) and may have added some.
venv_files >"$lists/after"
mapfile -d '' added < <(LC_ALL=C comm -z -13 "$lists/before" "$lists/after")
note "hardlink --quiet --ignore-time the ${#added[@]} added files"
hardlink --quiet --ignore-time "${added[@]}"
run "$venv/bin/pip" check
