#!/usr/bin/env bash
# Build a wheel of Intel's Triton (intel-xpu-backend-for-triton) at one exact commit.
# The LLVM is either Triton's own pinned prebuilt download (LLVM_SOURCE=prebuilt) or the one
# build-llvm.sh installed in $LLVM_PREFIX (LLVM_SOURCE=source).
set -euo pipefail

SCRIPT_NAME=build-triton
# shellcheck source=SCRIPTDIR/common.sh
. "$(dirname "$0")/common.sh"

usage() {
  cat <<'EOF'
usage: build-triton.sh [--dry-run] [--help]

Environment (the Dockerfile passes its build args under the same names):
  TRITON_COMMIT   commit to build (required, 40 hex)
  TRITON_REPO     default https://github.com/intel/intel-xpu-backend-for-triton
  LLVM_SOURCE     prebuilt (default) | source
  LLVM_COMMIT     the LLVM the commit pins, when known: checked against the checkout (prebuilt)
  LLVM_PREFIX     LLVM built by build-llvm.sh (LLVM_SOURCE=source), default /opt/llvm
  WHEEL_DIR       where the wheel goes, default /wheels
  TRITON_SRC      checkout folder, default /src/triton
  MAX_JOBS        parallel compile jobs, default: nproc
  PYTHON          interpreter to build for, default python3
  TRITON_HOME     Triton's download cache lives in $TRITON_HOME/.triton (default $HOME)
  CCACHE_DIR      default /root/.cache/ccache
A GitHub token is read from /run/secrets/github_token when that file exists (never printed).
--dry-run prints the exact commands and runs nothing.
EOF
}

parse_args "$@"

triton_llvm_defaults
WHEEL_DIR=${WHEEL_DIR:-/wheels}
MAX_JOBS=${MAX_JOBS:-$(default_jobs)}
PYTHON=${PYTHON:-python3}
export CCACHE_DIR=${CCACHE_DIR:-/root/.cache/ccache}

require_commit TRITON_COMMIT "$TRITON_COMMIT"
require_uint MAX_JOBS "$MAX_JOBS"
case $LLVM_SOURCE in
  prebuilt | source) ;;
  *) die "LLVM_SOURCE=$LLVM_SOURCE is not prebuilt or source" "use LLVM_SOURCE=prebuilt (default) or LLVM_SOURCE=source (--llvm)" ;;
esac
if [ "$LLVM_SOURCE" = source ] && [ "$DRY_RUN" != 1 ] && [ ! -d "$LLVM_PREFIX/lib/cmake/mlir" ]; then
  die "LLVM_SOURCE=source but $LLVM_PREFIX has no MLIR (lib/cmake/mlir missing)" \
    "run build-llvm.sh with LLVM_SOURCE=source first (same LLVM_PREFIX), or use LLVM_SOURCE=prebuilt"
fi

use_ca_bundle
use_github_token
use_oneapi_env
git_checkout "$TRITON_REPO" "$TRITON_COMMIT" "$TRITON_SRC"

# Newer commits (e.g. 9e23713) keep setup.py at the root; older ones (e.g. 197f5f8) in python/.
setup_dir=$TRITON_SRC
if [ -f "$TRITON_SRC/python/setup.py" ] && [ ! -f "$TRITON_SRC/setup.py" ]; then
  setup_dir=$TRITON_SRC/python
elif [ "$DRY_RUN" = 1 ] && [ ! -d "$TRITON_SRC" ]; then
  note "setup.py location is read after checkout; shown for a root setup.py (older commits build from python/)"
fi

# Build requirements from the checkout itself (cmake<4, ninja, pybind11...), then a build without
# isolation: the same toolchain every time, so ccache hits survive between builds.
run "$PYTHON" -m pip install -r "$TRITON_SRC/python/requirements.txt"

if [ "$LLVM_SOURCE" = source ]; then
  set_env LLVM_SYSPATH "$LLVM_PREFIX"
  set_env LLVM_INCLUDE_DIRS "$LLVM_PREFIX/include"
  set_env LLVM_LIBRARY_DIR "$LLVM_PREFIX/lib"
else
  # setup.py downloads the LLVM the checkout pins; a hash env/pins.toml records must be that one.
  resolve_llvm_commit "$TRITON_SRC"
  note "LLVM_SOURCE=prebuilt: setup.py downloads LLVM $LLVM_COMMIT into \$TRITON_HOME/.triton"
fi
set_env MAX_JOBS "$MAX_JOBS"
if have ccache || [ "$DRY_RUN" = 1 ]; then
  set_env TRITON_BUILD_WITH_CCACHE true
fi

run mkdir -p "$WHEEL_DIR"
run "$PYTHON" -m pip wheel --no-deps --no-build-isolation --wheel-dir "$WHEEL_DIR" -v "$setup_dir"
if [ "$DRY_RUN" != 1 ]; then
  ls "$WHEEL_DIR"/triton-*.whl >/dev/null 2>&1 ||
    die "no triton wheel in $WHEEL_DIR after the build" "read the build log above for the first error"
  note "built: $(cd "$WHEEL_DIR" && ls triton-*.whl)"
fi
