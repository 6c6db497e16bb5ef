# shellcheck shell=bash
# The one helper file every image-build script in scripts/ sources (as PyTorch's
# .ci/docker/common/*.sh source common_utils.sh): printing and running commands (--dry-run),
# errors, checkouts, tokens, CA bundles and apt's options. Sourced, never run; sourcing it only
# sets variables and defines functions.

DRY_RUN=${DRY_RUN:-0}
GITHUB_TOKEN_FILE=${GITHUB_TOKEN_FILE:-/run/secrets/github_token}

# One line on stderr naming the problem, one naming the fix; exit 2 (bad input / missing part).
die() {
  printf 'error: %s\n' "$1" >&2
  if [ -n "${2:-}" ]; then printf '  fix: %s\n' "$2" >&2; fi
  exit 2
}

# Progress for the reader; a shell comment in --dry-run output so that output stays a script.
note() {
  if [ "$DRY_RUN" = 1 ]; then
    printf '# [%s] %s\n' "${SCRIPT_NAME:-xpukit}" "$*"
  else
    printf '[%s] %s\n' "${SCRIPT_NAME:-xpukit}" "$*"
  fi
}

# Shell-quote a command for printing. A dry run that cannot know a value yet (it is read from a
# checkout that does not exist) passes a placeholder such as '$LLVM_COMMIT', printed as a variable.
quote_cmd() {
  local out='' arg q="'"
  for arg in "$@"; do
    case $arg in
      *'$'[A-Z_]*) out+="\"$arg\" " ;;
      '' | *[!A-Za-z0-9_./:=,@%+-]*) out+="$q${arg//$q/$q\\$q$q}$q " ;;
      *) out+="$arg " ;;
    esac
  done
  printf '%s' "${out% }"
}

# Write LINE... to FILE, one per line; a dry run prints the command instead.
write_lines() {
  local file=$1
  shift
  if [ "$DRY_RUN" = 1 ]; then
    printf '%s %s > %s\n' "printf '%s\\n'" "$(quote_cmd "$@")" "$(quote_cmd "$file")"
  else
    printf '%s\n' "$@" >"$file"
  fi
}

# Print a command shell-quoted; run it unless --dry-run. Dry-run output is the exact command list.
run() {
  if [ "$DRY_RUN" = 1 ]; then
    printf '%s\n' "$(quote_cmd "$@")"
  else
    printf '+ %s\n' "$(quote_cmd "$@")"
    "$@"
  fi
}

# Run a command inside a directory (printed as a subshell so dry-run output stays runnable).
run_in() {
  local dir=$1
  shift
  if [ "$DRY_RUN" = 1 ]; then
    printf '(cd %s && %s)\n' "$(quote_cmd "$dir")" "$(quote_cmd "$@")"
  else
    printf '+ (cd %s && %s)\n' "$(quote_cmd "$dir")" "$(quote_cmd "$@")"
    (cd "$dir" && "$@")
  fi
}

# Export a variable and show it as the export line it is.
set_env() {
  printf 'export %s=%s\n' "$1" "$(quote_cmd "$2")"
  export "$1=$2"
}

require_commit() {
  local name=$1 value=$2
  if [ -z "$value" ]; then
    die "$name is empty" "set $name to a full 40-character commit hash (env/pins.toml, xpu profile)"
  fi
  case $value in
    *[!0-9a-f]*) die "$name=$value is not a lowercase hex commit hash" "use the full 40-character hash" ;;
  esac
  if [ "${#value}" -ne 40 ]; then
    die "$name=$value has ${#value} characters, not 40" "use the full commit hash, not a short one or a branch"
  fi
}

require_uint() {
  case $2 in
    '' | *[!0-9]*) die "$1=$2 is not a positive integer" "set $1 to a number of parallel jobs, e.g. 8" ;;
  esac
  [ "$2" -gt 0 ] || die "$1=$2 must be at least 1" "set $1 to a number of parallel jobs, e.g. 8"
}

# Behind a TLS-intercepting proxy the build trusts the host's CA bundle, passed as a BuildKit
# secret so it never lands in a layer: point git, pip and Python's urllib (Triton's downloads) at it.
use_ca_bundle() {
  local bundle=${CA_BUNDLE_FILE:-/run/secrets/ca_bundle}
  [ -s "$bundle" ] || return 0
  note "trusting the CA bundle at $bundle"
  export GIT_SSL_CAINFO="$bundle" PIP_CERT="$bundle" SSL_CERT_FILE="$bundle" REQUESTS_CA_BUNDLE="$bundle"
}

# Give git a GitHub token for this process only: GIT_CONFIG_* env entries are never written to
# .git/config and never appear in argv. The header is scoped to https://github.com/ only.
use_github_token() {
  if [ ! -s "$GITHUB_TOKEN_FILE" ]; then
    note "no GitHub token at $GITHUB_TOKEN_FILE: anonymous clones (rate limits may apply)"
    return 0
  fi
  note "using the GitHub token from $GITHUB_TOKEN_FILE for https://github.com/ (value not shown)"
  [ "$DRY_RUN" = 1 ] && return 0
  local token auth
  token=$(tr -d '\r\n' <"$GITHUB_TOKEN_FILE")
  auth=$(printf 'x-access-token:%s' "$token" | base64 -w0)
  export GIT_CONFIG_COUNT=1
  export GIT_CONFIG_KEY_0=http.https://github.com/.extraheader
  export GIT_CONFIG_VALUE_0="Authorization: Basic $auth"
}

# Check out exactly COMMIT of REPO into DIR: fetch that one commit (no branch guessing), detach,
# then prove HEAD is the commit. A DIR already at COMMIT is reused (reruns, cache mounts).
git_checkout() {
  local repo=$1 commit=$2 dir=$3
  if [ "$DRY_RUN" != 1 ] && [ -d "$dir/.git" ] &&
    [ "$(git -C "$dir" rev-parse HEAD 2>/dev/null || true)" = "$commit" ]; then
    note "$dir is already at $commit"
    return 0
  fi
  run git init -q "$dir"
  # The URL is passed on the command line, not stored as a remote: nothing secret can land in
  # .git/config, and the checkout names only the commit it holds.
  run git -C "$dir" fetch --depth 1 --no-tags "$repo" "$commit"
  run git -C "$dir" -c advice.detachedHead=false checkout -q --detach FETCH_HEAD
  verify_head "$dir" "$commit"
}

verify_head() {
  local dir=$1 commit=$2 head
  if [ "$DRY_RUN" = 1 ]; then
    # shellcheck disable=SC2016 # printed for the reader: expands when the printed command runs
    printf 'test "$(git -C %s rev-parse HEAD)" = %s\n' "$(quote_cmd "$dir")" "$(quote_cmd "$commit")"
    return 0
  fi
  head=$(git -C "$dir" rev-parse HEAD)
  [ "$head" = "$commit" ] || die "$dir is at $head, expected $commit" "remove $dir and rerun"
  note "verified: $dir is at $commit"
}

# The Triton checkout and LLVM that build-llvm.sh and build-triton.sh share, defaulted once.
triton_llvm_defaults() {
  TRITON_REPO=${TRITON_REPO:-https://github.com/intel/intel-xpu-backend-for-triton}
  TRITON_COMMIT=${TRITON_COMMIT:-}
  LLVM_SOURCE=${LLVM_SOURCE:-prebuilt}
  LLVM_PREFIX=${LLVM_PREFIX:-/opt/llvm}
  TRITON_SRC=${TRITON_SRC:-/src/triton}
  LLVM_COMMIT=${LLVM_COMMIT:-}  # known when env/pins.toml records it for this commit, else read from the checkout
}

# The LLVM a Triton checkout pins: cmake/llvm-info.json's llvm_hash (upstream since mid-2026), else
# cmake/llvm-hash.txt (older commits). Prints nothing when the checkout has neither.
triton_llvm_pin() {
  local src=$1
  if [ -f "$src/cmake/llvm-info.json" ]; then
    "${PYTHON:-python3}" -c 'import json, sys; print(json.load(open(sys.argv[1]))["llvm_hash"])' "$src/cmake/llvm-info.json"
  elif [ -f "$src/cmake/llvm-hash.txt" ]; then
    tr -d ' \r\n' <"$src/cmake/llvm-hash.txt"
    echo
  fi
}

# LLVM_COMMIT read from the Triton checkout in $1 at build time. A hash env/pins.toml records for
# this commit (LLVM_COMMIT on entry, may be empty) must be the one the checkout pins.
resolve_llvm_commit() {
  local src=$1 found
  if [ "$DRY_RUN" = 1 ] && [ ! -d "$src" ]; then
    # shellcheck disable=SC2016 # printed for the reader: expands when the printed command runs
    printf 'LLVM_COMMIT=$(llvm_hash of %s, else the content of %s)\n' "$src/cmake/llvm-info.json" "$src/cmake/llvm-hash.txt"
    # shellcheck disable=SC2016 # printed for the reader: expands when the printed command runs
    [ -z "${LLVM_COMMIT:-}" ] || printf 'test "$LLVM_COMMIT" = %s\n' "$LLVM_COMMIT"
    # shellcheck disable=SC2016 # printed for the reader: expands when the printed command runs
    LLVM_COMMIT=${LLVM_COMMIT:-'$LLVM_COMMIT'}
    return 0
  fi
  found=$(triton_llvm_pin "$src")
  [ -n "$found" ] || die "Triton ${TRITON_COMMIT:-checkout} in $src has neither cmake/llvm-info.json nor cmake/llvm-hash.txt" \
    "check that TRITON_COMMIT is an intel-xpu-backend-for-triton commit"
  require_commit "LLVM_COMMIT (from $src/cmake)" "$found"
  if [ -n "${LLVM_COMMIT:-}" ] && [ "$found" != "$LLVM_COMMIT" ]; then
    die "Triton ${TRITON_COMMIT:-checkout} pins LLVM $found, but env/pins.toml records $LLVM_COMMIT for it" \
      "correct xpu.triton.llvm_pins in env/pins.toml (or empty it: the build reads the pin)"
  fi
  LLVM_COMMIT=$found
  note "Triton ${TRITON_COMMIT:-checkout} pins LLVM $LLVM_COMMIT (read from its checkout)"
}

# oneAPI's environment for a build step: DLE images bake it into ENV (SETVARS_COMPLETED=1); an OMIX
# image (--base omix) has only /opt/intel/oneapi/setvars.sh, sourced here.
use_oneapi_env() {
  local setvars=${ONEAPI_ROOT:-/opt/intel/oneapi}/setvars.sh
  if [ -z "${SETVARS_COMPLETED:-}" ] && [ -f "$setvars" ]; then
    if [ "$DRY_RUN" = 1 ]; then
      printf '. %s\n' "$(quote_cmd "$setvars")"
      return 0
    fi
    set +u
    # shellcheck disable=SC1090 # the image's own oneAPI, read at build time
    . "$setvars" >/dev/null
    set -u
    note "oneAPI environment from $setvars"
  fi
}

# Number of parallel jobs: MAX_JOBS if set, else the CPUs this process may use.
default_jobs() { nproc 2>/dev/null || echo 4; }

have() { command -v "$1" >/dev/null 2>&1; }

# The flags every script takes: --dry-run and --help (each script defines usage()).
parse_args() {
  local arg
  for arg in "$@"; do
    case $arg in
      --dry-run) DRY_RUN=1 ;;
      --help | -h) usage; exit 0 ;;
      *) usage >&2; die "unknown argument: $arg" "run $SCRIPT_NAME.sh --help" ;;
    esac
  done
}

# ---- the kit's venv: install-python.sh (the image's packages) and install-layer.sh (an optional
# layer's, `invoke build --with NAME`) share their arguments, their pip settings, the install from
# the wheelhouse and the slimming of what they installed.

# `SCRIPT [--dry-run] LOCK_FILE ARG...`, --help printing the script's header: sets lock and lock_args.
venv_script_args() {
  if [[ "${1:-}" == "--dry-run" ]]; then DRY_RUN=1; shift; fi
  if [[ "${1:-}" == "--help" || $# -lt 1 ]]; then sed -n '2,8p' "$0"; exit 0; fi
  lock=$1
  shift
  # shellcheck disable=SC2034 # read by the script that calls this
  lock_args=("$@")
}

# The venv's path is the image layout's (xpukit/layout.py), passed by invoke build as a build arg;
# the wheelhouse is the Dockerfile's cache mount target. Sets venv and wheelhouse; exports pip's settings.
venv_env() {
  [[ -n "${XPUKIT_VENV:-}" ]] || die "XPUKIT_VENV is not set" "set XPUKIT_VENV to the venv's path (invoke build passes it)"
  venv=$XPUKIT_VENV
  wheelhouse=${XPUKIT_WHEELHOUSE:-/run/xpukit-wheelhouse}
  use_ca_bundle
  export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_PROGRESS_BAR=off
  # No bytecode as a side effect: a download imports stdlib modules (netrc) whose .pyc the system
  # python would then write into the layer only when the wheelhouse was empty. The venv's .pyc files
  # are written on purpose afterwards, hash-checked (compile_checked_hash).
  export PYTHONDONTWRITEBYTECODE=1
}

# Install LOCK_FILE's hash-locked wheels into the venv. Wheels are kept in a wheelhouse on a BuildKit
# cache mount: pip's own HTTP cache stays empty behind proxies that drop caching headers, a wheelhouse
# does not. Offline first: everything already in the wheelhouse installs with no index at all.
install_locked() {
  local lock=$1
  local pip_install=("$venv/bin/pip" install -q --require-hashes --no-deps --only-binary=:all:
    --no-index --find-links "$wheelhouse" -r "$lock")
  run mkdir -p "$wheelhouse"
  if ! run "${pip_install[@]}" 2>/dev/null; then
    note "the wheelhouse lacks some locked wheels; downloading them"
    run "$venv/bin/pip" download -q --require-hashes --no-deps --only-binary=:all: -d "$wheelhouse" -r "$lock"
    run "${pip_install[@]}"
  fi
}

# Strip DWARF from each shared object among the NUL-separated paths on stdin (libtriton.so carries
# about 240 MiB, oneAPI's libomptarget.so 44): symbol names stay, so backtraces still name functions.
strip_debug_info() {
  local object
  while IFS= read -r -d '' object; do
    case ${object##*/} in *.so*) ;; *) continue ;; esac
    # grep reads all of readelf's output: with -q it would stop early, readelf would die of SIGPIPE,
    # and under pipefail the test would fail at random (some builds stripped, others not).
    if readelf --section-headers --wide "$object" 2>/dev/null | grep ' \.debug_info ' >/dev/null; then
      run strip --strip-debug "$object"
    fi
  done
}

# Bytecode that does not depend on when the build ran: pip writes .pyc files stamped with each
# source's extraction time; these are rewritten to check the source's hash instead
# (docs/reproducible.md). -j0 uses every core; the result does not depend on the order. Arguments
# are compileall's: folders, files, or `-i LIST` (one path a line).
compile_checked_hash() {
  run "$venv/bin/python" -m compileall -q -f -j0 --invalidation-mode checked-hash "$@"
}

# apt's options during the image build (install-apt.sh, install-ocloc.sh).
# One cache mount, /run/xpukit-apt, holds apt's downloads, package cache and lists, because
# buildah < 1.29 (podman builds) unlocks only the last `sharing=locked` mount of a RUN, and a second
# locked mount hangs the next RUN that uses it (buildah #4349). The lists sit one folder down:
# `apt-get update` deletes every file it does not know from the lists folder, buildah's lock file
# among them (buildah #4342).
APT_CACHE_ROOT=/run/xpukit-apt  # a mount target under /run: the Dockerfile says why
apt_opts=(-o Dpkg::Use-Pty=0 -o "Dir::Cache=$APT_CACHE_ROOT" -o "Dir::State::Lists=$APT_CACHE_ROOT/lists")
# A CA bundle given as a BuildKit secret (invoke build --ca-bundle) lets apt reach https mirrors
# behind TLS-intercepting proxies; it is read in place and never copied into the image.
if [[ -s ${CA_BUNDLE_FILE:-/run/secrets/ca_bundle} ]]; then
  apt_opts+=(-o "Acquire::https::CAInfo=${CA_BUNDLE_FILE:-/run/secrets/ca_bundle}")
fi
# Folders apt expects under its cache and lists (created inside the mount, never in a layer).
# shellcheck disable=SC2034 # read by the scripts that source this file
apt_cache_dirs=("$APT_CACHE_ROOT/archives/partial" "$APT_CACHE_ROOT/lists/partial")
