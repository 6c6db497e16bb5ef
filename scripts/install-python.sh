#!/usr/bin/env bash
# Create the kit's venv and install the hash-locked requirements, then any wheels built in
# earlier stages (the xpu profile's Triton and PyTorch).
#   install-python.sh [--dry-run] LOCK_FILE [WHEEL_DIR...]
# Wheels are kept in a wheelhouse on a BuildKit cache mount: pip's own HTTP cache stays empty
# behind proxies that drop caching headers, a wheelhouse does not.
set -euo pipefail

dry_run=0
if [[ "${1:-}" == "--dry-run" ]]; then dry_run=1; shift; fi
if [[ "${1:-}" == "--help" || $# -lt 1 ]]; then sed -n '2,6p' "$0"; exit 0; fi
lock="$1"; shift
venv="${XPUKIT_VENV:-/opt/xpukit/venv}"
wheelhouse="${XPUKIT_WHEELHOUSE:-/var/cache/xpukit/wheelhouse}"

run() { echo "+ $*"; if [[ $dry_run -eq 0 ]]; then "$@"; fi; }
if [[ -s /run/secrets/ca_bundle ]]; then export PIP_CERT=/run/secrets/ca_bundle; fi
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_PROGRESS_BAR=off

run python3 -m venv "$venv"
run mkdir -p "$wheelhouse"
# Offline first: everything already in the wheelhouse installs with no index at all.
if ! run "$venv/bin/pip" install -q --require-hashes --no-deps --only-binary=:all: \
      --no-index --find-links "$wheelhouse" -r "$lock" 2>/dev/null; then
  echo "install-python.sh: the wheelhouse lacks some locked wheels; downloading them"
  run "$venv/bin/pip" download -q --require-hashes --no-deps --only-binary=:all: -d "$wheelhouse" -r "$lock"
  run "$venv/bin/pip" install -q --require-hashes --no-deps --only-binary=:all: \
      --no-index --find-links "$wheelhouse" -r "$lock"
fi

for dir in "$@"; do
  shopt -s nullglob
  wheels=("$dir"/*.whl)
  shopt -u nullglob
  if [[ ${#wheels[@]} -gt 0 ]]; then
    run "$venv/bin/pip" install -q --no-deps "${wheels[@]}"
  fi
done

# Wheels cannot carry symlinks, so the UR/OpenCL wheels install identical copies of large .so
# files; hardlinking them in this same layer saves hundreds of MiB.
run hardlink --quiet "$venv"
# PyTorch's XPU wheels name pytorch-triton-xpu, which this image replaces with its own Triton.
if [[ $dry_run -eq 0 ]]; then
  if ! problems="$("$venv/bin/pip" check 2>&1)"; then
    problems="$(grep -v 'pytorch-triton-xpu' <<<"$problems" || true)"
    if [[ -n "$problems" ]]; then echo "$problems" >&2; exit 1; fi
  fi
fi
