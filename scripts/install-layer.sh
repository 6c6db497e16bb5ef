#!/usr/bin/env bash
# Install an optional layer's hash-locked requirements into the kit's venv (`invoke build --with
# NAME`, the Dockerfile's layer stages). The lock holds the image's own packages at their locked
# versions (already installed: skipped) plus the layer's; wheels come from the wheelhouse cache mount,
# downloaded only when missing, so a rebuild downloads nothing.
#   install-layer.sh [--dry-run] LOCK_FILE PACKAGE_DIR...
# PACKAGE_DIR: the layer's top-level packages under site-packages, byte-compiled like the venv's.
set -euo pipefail

SCRIPT_NAME=install-layer
# shellcheck source=SCRIPTDIR/common.sh
. "$(dirname "$0")/common.sh"

if [[ "${1:-}" == "--dry-run" ]]; then DRY_RUN=1; shift; fi
if [[ "${1:-}" == "--help" || $# -lt 1 ]]; then sed -n '2,8p' "$0"; exit 0; fi
lock="$1"; shift
[[ -n "${XPUKIT_VENV:-}" ]] || die "XPUKIT_VENV is not set" "set XPUKIT_VENV to the venv's path (invoke build passes it)"
venv=$XPUKIT_VENV
wheelhouse="${XPUKIT_WHEELHOUSE:-/run/xpukit-wheelhouse}"

use_ca_bundle
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_PROGRESS_BAR=off PYTHONDONTWRITEBYTECODE=1

run mkdir -p "$wheelhouse"
if ! run "$venv/bin/pip" install -q --require-hashes --no-deps --only-binary=:all: \
      --no-index --find-links "$wheelhouse" -r "$lock" 2>/dev/null; then
  note "the wheelhouse lacks some of the layer's wheels; downloading them"
  run "$venv/bin/pip" download -q --require-hashes --no-deps --only-binary=:all: -d "$wheelhouse" -r "$lock"
  run "$venv/bin/pip" install -q --require-hashes --no-deps --only-binary=:all: \
      --no-index --find-links "$wheelhouse" -r "$lock"
fi
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
for package in "$@"; do
  # Bytecode checked by the source's hash, as install-python.sh writes the venv's (docs/reproducible.md).
  run "$venv/bin/python" -m compileall -q -f -j0 --invalidation-mode checked-hash "$site/$package"
done
[[ $DRY_RUN -eq 1 ]] || run "$venv/bin/pip" check
