#!/usr/bin/env bash
# Put a PyTorch wheel for XPU into $WHEEL_DIR, or nothing:
#   TORCH_SOURCE=none    an empty $WHEEL_DIR (the kit works without torch: launches go through UR)
#   TORCH_SOURCE=wheel   download the pinned XPU wheel (torch==$TORCH_VERSION from $TORCH_INDEX_URL)
#   TORCH_SOURCE=source  build PyTorch at $TORCH_COMMIT for $TORCH_XPU_ARCH_LIST (1-3 hours)
set -euo pipefail

SCRIPT_NAME=build-pytorch
# shellcheck source=SCRIPTDIR/common.sh
. "$(dirname "$0")/common.sh"

usage() {
  cat <<'EOF'
usage: build-pytorch.sh [--dry-run] [--help]

Environment (the Dockerfile passes its build args under the same names):
  TORCH_SOURCE         none (default) | wheel | source
  TORCH_COMMIT         commit to build (source; 40 hex); empty: the one TRITON_COMMIT pins in its
                       .github/pins/pytorch.txt, read from a checkout of it at build time
  TRITON_COMMIT        the Triton commit whose PyTorch pin to read when TORCH_COMMIT is empty
  TRITON_REPO          default https://github.com/intel/intel-xpu-backend-for-triton
  TRITON_PINS_SRC      checkout folder for reading that pin, default /src/triton-pins
  TORCH_REPO           default https://github.com/pytorch/pytorch
  TORCH_VERSION        exact version to download (wheel), e.g. the pin in env/pins.toml
  TORCH_INDEX_URL      index holding XPU wheels (wheel), default https://download.pytorch.org/whl/xpu
  TORCH_XPU_ARCH_LIST  AOT targets (source), default pvc,bmg,dg2,arl-h,mtl-h
  TORCH_SRC            checkout folder, default /src/pytorch
  WHEEL_DIR            where the wheel goes, default /wheels
  MAX_JOBS             parallel compile jobs, default: nproc
  PYTHON               default python3
  CCACHE_DIR           default /root/.cache/ccache
A GitHub token is read from /run/secrets/github_token when that file exists (never printed).
--dry-run prints the exact commands and runs nothing.
EOF
}

parse_args "$@"

TORCH_SOURCE=${TORCH_SOURCE:-none}
TORCH_COMMIT=${TORCH_COMMIT:-}
TRITON_COMMIT=${TRITON_COMMIT:-}
TRITON_REPO=${TRITON_REPO:-https://github.com/intel/intel-xpu-backend-for-triton}
TRITON_PINS_SRC=${TRITON_PINS_SRC:-/src/triton-pins}
TORCH_REPO=${TORCH_REPO:-https://github.com/pytorch/pytorch}
TORCH_VERSION=${TORCH_VERSION:-}
TORCH_INDEX_URL=${TORCH_INDEX_URL:-https://download.pytorch.org/whl/xpu}
TORCH_XPU_ARCH_LIST=${TORCH_XPU_ARCH_LIST:-pvc,bmg,dg2,arl-h,mtl-h}
TORCH_SRC=${TORCH_SRC:-/src/pytorch}
WHEEL_DIR=${WHEEL_DIR:-/wheels}
MAX_JOBS=${MAX_JOBS:-$(default_jobs)}
PYTHON=${PYTHON:-python3}
export CCACHE_DIR=${CCACHE_DIR:-/root/.cache/ccache}

build_none() {
  run mkdir -p "$WHEEL_DIR"
  note "TORCH_SOURCE=none: no PyTorch; $WHEEL_DIR stays empty (Triton launches go through UR)"
}

build_wheel() {
  if [ -z "$TORCH_VERSION" ]; then
    die "TORCH_SOURCE=wheel but TORCH_VERSION is empty: no XPU wheel version is pinned" \
      "fill the torch wheel version pin of the xpu profile in env/pins.toml (passed as TORCH_VERSION), or use --torch source / --torch none"
  fi
  [ -n "$TORCH_INDEX_URL" ] || die "TORCH_INDEX_URL is empty" "set it to the index holding XPU wheels"
  use_ca_bundle
  run mkdir -p "$WHEEL_DIR"
  # --no-deps: the XPU wheel requires pytorch-triton-xpu, which would replace the Triton this
  # kit builds; the final stage installs torch's other dependencies itself.
  run "$PYTHON" -m pip download --no-deps --only-binary=:all: --index-url "$TORCH_INDEX_URL" \
    --dest "$WHEEL_DIR" "torch==$TORCH_VERSION"
}

# TORCH_COMMIT from the Triton commit's own .github/pins/pytorch.txt: another Triton's pin is never
# borrowed (a Triton built against another Triton's PyTorch fails in ways that look like bugs).
read_torch_pin() {
  local pin_file=$TRITON_PINS_SRC/.github/pins/pytorch.txt
  [ -n "$TRITON_COMMIT" ] || die "TORCH_COMMIT is empty and TRITON_COMMIT is not set to read it from" \
    "pass TORCH_COMMIT, or TRITON_COMMIT (invoke build passes both)"
  require_commit TRITON_COMMIT "$TRITON_COMMIT"
  git_checkout "$TRITON_REPO" "$TRITON_COMMIT" "$TRITON_PINS_SRC"
  if [ -f "$pin_file" ]; then
    TORCH_COMMIT=$(tr -d ' \r\n' <"$pin_file")
    require_commit "TORCH_COMMIT (from $pin_file)" "$TORCH_COMMIT"
    note "Triton $TRITON_COMMIT pins PyTorch $TORCH_COMMIT (read from its $pin_file)"
  elif [ "$DRY_RUN" = 1 ]; then
    # shellcheck disable=SC2016 # printed for the reader: expands when the printed command runs
    printf 'TORCH_COMMIT=$(cat %q)\n' "$pin_file"
    # shellcheck disable=SC2016 # printed for the reader: expands when the printed command runs
    TORCH_COMMIT='$TORCH_COMMIT'
  else
    die "Triton $TRITON_COMMIT has no .github/pins/pytorch.txt: its PyTorch pin is unknown" \
      "pass --torch wheel or --torch none, or a Triton commit that pins PyTorch"
  fi
}

build_source() {
  use_ca_bundle
  use_github_token
  if [ -z "$TORCH_COMMIT" ]; then read_torch_pin; else require_commit TORCH_COMMIT "$TORCH_COMMIT"; fi
  require_uint MAX_JOBS "$MAX_JOBS"
  # Comma-separated ocloc device names; anything else would fail an hour into the build.
  case $TORCH_XPU_ARCH_LIST in
    '' | ,* | *, | *,,* | *[!a-z0-9,._-]*)
      die "TORCH_XPU_ARCH_LIST='$TORCH_XPU_ARCH_LIST' is not a comma-separated list of device names" \
        "use e.g. TORCH_XPU_ARCH_LIST=pvc or pvc,bmg,dg2,arl-h,mtl-h (no spaces)"
      ;;
  esac

  use_oneapi_env
  if [ "$DRY_RUN" != 1 ] && ! have icpx; then
    die "icpx (oneAPI DPC++) not found: PyTorch would silently build without XPU" \
      "build inside the Deep Learning Essentials image, or source /opt/intel/oneapi/setvars.sh"
  fi

  git_checkout "$TORCH_REPO" "$TORCH_COMMIT" "$TORCH_SRC"
  run git -C "$TORCH_SRC" submodule update --init --recursive --jobs 8

  run "$PYTHON" -m pip install -r "$TORCH_SRC/requirements.txt" 'cmake<4' ninja build

  # USE_XPU=1 states intent; the CMakeCache check below catches PyTorch turning it off.
  set_env USE_XPU 1
  set_env USE_XCCL 1
  set_env USE_STATIC_MKL 1
  set_env TORCH_XPU_ARCH_LIST "$TORCH_XPU_ARCH_LIST"
  set_env MAX_JOBS "$MAX_JOBS"
  if have ccache || [ "$DRY_RUN" = 1 ]; then
    # CMake (>= 3.17) takes these from the environment for every project PyTorch configures.
    set_env CMAKE_C_COMPILER_LAUNCHER ccache
    set_env CMAKE_CXX_COMPILER_LAUNCHER ccache
  fi
  run mkdir -p "$WHEEL_DIR"
  run_in "$TORCH_SRC" "$PYTHON" -m build --wheel --no-isolation --outdir "$WHEEL_DIR"
  if [ "$DRY_RUN" != 1 ]; then
    grep -q '^USE_XPU:BOOL=ON' "$TORCH_SRC/build/CMakeCache.txt" ||
      die "PyTorch was configured without XPU (USE_XPU is not ON in build/CMakeCache.txt)" \
        "check the oneAPI environment (icpx, SYCL headers) in the build stage"
    if have ccache; then run ccache --show-stats; fi
  fi
}

case $TORCH_SOURCE in
  none) build_none ;;
  wheel) build_wheel ;;
  source) build_source ;;
  *) die "TORCH_SOURCE=$TORCH_SOURCE is not none, wheel or source" "use --torch none|wheel|source" ;;
esac

if [ "$DRY_RUN" != 1 ] && [ "$TORCH_SOURCE" != none ]; then
  ls "$WHEEL_DIR"/torch-*.whl >/dev/null 2>&1 ||
    die "no torch wheel in $WHEEL_DIR" "read the log above for the first error"
  note "ready: $(cd "$WHEEL_DIR" && ls torch-*.whl)"
fi
