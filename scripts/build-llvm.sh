#!/usr/bin/env bash
# Provide the LLVM/MLIR that a Triton commit pins (cmake/llvm-info.json or cmake/llvm-hash.txt in that commit).
#   LLVM_SOURCE=prebuilt  Triton's own setup.py downloads its pinned LLVM while build-triton.sh
#                         runs; this script only records that choice in $LLVM_PREFIX.
#   LLVM_SOURCE=source    clone llvm-project at the pinned hash and build MLIR+LLVM into
#                         $LLVM_PREFIX with ccache (hours on a laptop, ~30-60 min on 32 cores).
set -euo pipefail

SCRIPT_NAME=build-llvm
# shellcheck source=SCRIPTDIR/common.sh
. "$(dirname "$0")/common.sh"

usage() {
  cat <<'EOF'
usage: build-llvm.sh [--dry-run] [--help]

Environment (the Dockerfile passes its build args under the same names):
  TRITON_COMMIT   Triton commit whose cmake/llvm-info.json (or, before mid-2026, cmake/llvm-hash.txt)
                  names the LLVM (required, 40 hex)
  LLVM_COMMIT     the LLVM that commit pins, when known: checked against the checkout (default: read it)
  TRITON_REPO     default https://github.com/intel/intel-xpu-backend-for-triton
  LLVM_SOURCE     prebuilt (default) | source
  LLVM_PREFIX     install prefix, default /opt/llvm
  LLVM_REPO       default https://github.com/llvm/llvm-project
  TRITON_SRC      Triton checkout to read the hash from, default /src/triton
  LLVM_SRC        llvm-project checkout, default /src/llvm-project
  MAX_JOBS        parallel compile jobs, default: nproc
  CCACHE_DIR      default /root/.cache/ccache (make it a BuildKit cache mount)
  LLVM_CHECK      1 = also run check-mlir after the build (slow), default 0
--dry-run prints the exact commands and runs nothing.
EOF
}

parse_args "$@"

triton_llvm_defaults
LLVM_REPO=${LLVM_REPO:-https://github.com/llvm/llvm-project}
LLVM_SRC=${LLVM_SRC:-/src/llvm-project}
MAX_JOBS=${MAX_JOBS:-$(default_jobs)}
LLVM_CHECK=${LLVM_CHECK:-0}
export CCACHE_DIR=${CCACHE_DIR:-/root/.cache/ccache}

require_commit TRITON_COMMIT "$TRITON_COMMIT"
require_uint MAX_JOBS "$MAX_JOBS"

case $LLVM_SOURCE in
  prebuilt)
    note "LLVM_SOURCE=prebuilt: Triton's setup.py downloads the LLVM pinned by $TRITON_COMMIT during build-triton.sh; nothing to build here"
    run mkdir -p "$LLVM_PREFIX"
    # An empty prefix plus this marker lets the Dockerfile COPY the stage either way.
    write_lines "$LLVM_PREFIX/xpukit-llvm.txt" source=prebuilt "triton_commit=$TRITON_COMMIT"
    exit 0
    ;;
  source) ;;
  *) die "LLVM_SOURCE=$LLVM_SOURCE is not prebuilt or source" "use LLVM_SOURCE=prebuilt (default) or LLVM_SOURCE=source (--llvm)" ;;
esac

have_ccache=0
if have ccache || [ "$DRY_RUN" = 1 ]; then have_ccache=1; fi

use_ca_bundle
use_github_token
git_checkout "$TRITON_REPO" "$TRITON_COMMIT" "$TRITON_SRC"

resolve_llvm_commit "$TRITON_SRC"

git_checkout "$LLVM_REPO" "$LLVM_COMMIT" "$LLVM_SRC"

# The configuration upstream's compile-triton.sh --llvm uses: Release with assertions and
# dump(), MLIR and lld, the four targets Triton's backends need, and the utilities (FileCheck...)
# installed so Triton's lit tests can find them.
cmake_args=(
  -G Ninja
  -S "$LLVM_SRC/llvm"
  -B "$LLVM_SRC/build"
  -DCMAKE_BUILD_TYPE=Release
  -DLLVM_ENABLE_ASSERTIONS=ON
  -DLLVM_ENABLE_DUMP=ON
  "-DLLVM_ENABLE_PROJECTS=mlir;lld"
  "-DLLVM_TARGETS_TO_BUILD=X86;NVPTX;AMDGPU;SPIRV"
  -DLLVM_INSTALL_UTILS=ON
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
  "-DCMAKE_INSTALL_PREFIX=$LLVM_PREFIX"
  -DCMAKE_C_COMPILER=gcc
  -DCMAKE_CXX_COMPILER=g++
)
if [ "$have_ccache" = 1 ]; then
  cmake_args+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
else
  note "ccache not found: building without a compiler cache"
fi

run cmake "${cmake_args[@]}"
run cmake --build "$LLVM_SRC/build" --target install -j "$MAX_JOBS"
if [ "$LLVM_CHECK" = 1 ]; then
  run cmake --build "$LLVM_SRC/build" --target check-mlir -j "$MAX_JOBS"
fi
write_lines "$LLVM_PREFIX/xpukit-llvm.txt" source=source "triton_commit=$TRITON_COMMIT" "llvm_commit=$LLVM_COMMIT"
if [ "$have_ccache" = 1 ]; then run ccache --show-stats; fi
note "LLVM $LLVM_COMMIT installed in $LLVM_PREFIX"
