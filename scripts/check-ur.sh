#!/usr/bin/env bash
# Check that the image's oneAPI provides the Unified Runtime loader (libur_loader.so) with its
# adapters, and that a Level Zero loader (libze_loader.so.1) is present. Prints each library's
# path and version; exits 1 when either loader is absent.
set -euo pipefail

SCRIPT_NAME=check-ur
# shellcheck source=SCRIPTDIR/common.sh
. "$(dirname "$0")/common.sh"

usage() {
  cat <<'EOF'
usage: check-ur.sh [--dry-run] [--help]

Searches, in order: the folders in LD_LIBRARY_PATH, $ONEAPI_ROOT/compiler/*/lib,
$ONEAPI_ROOT/*/latest/lib, then the ldconfig cache.
Environment:
  ONEAPI_ROOT      default /opt/intel/oneapi
  XPUKIT_LDCONFIG  ldconfig command to list the cache, default ldconfig ("" skips it)
--dry-run prints the commands it would run and runs nothing.
EOF
}

parse_args "$@"

ONEAPI_ROOT=${ONEAPI_ROOT:-/opt/intel/oneapi}
XPUKIT_LDCONFIG=${XPUKIT_LDCONFIG-ldconfig}

search_dirs() {
  local d
  local IFS=:
  for d in ${LD_LIBRARY_PATH:-}; do [ -n "$d" ] && printf '%s\n' "$d"; done
  for d in "$ONEAPI_ROOT"/compiler/*/lib "$ONEAPI_ROOT"/*/latest/lib; do
    [ -d "$d" ] && printf '%s\n' "$d"
  done
  return 0
}

# First path of a library named $1 in the search folders, else from the ldconfig cache.
find_lib() {
  local name=$1 d
  while IFS= read -r d; do
    if [ -e "$d/$name" ]; then
      printf '%s\n' "$d/$name"
      return 0
    fi
  done < <(search_dirs)
  if [ -n "$XPUKIT_LDCONFIG" ]; then
    $XPUKIT_LDCONFIG -p 2>/dev/null | awk -v n="$name" '$1 == n { print $NF; exit }'
  fi
}

# Version from the real file's name: libur_loader.so.0.12.0 -> 0.12.0.
lib_version() {
  local real
  real=$(readlink -f "$1")
  case $real in
    *.so.*) printf '%s\n' "${real##*.so.}" ;;
    *) printf 'unknown (%s has no version suffix)\n' "$(basename "$real")" ;;
  esac
}

if [ "$DRY_RUN" = 1 ]; then
  printf 'ls -d %q/compiler/*/lib %q/*/latest/lib\n' "$ONEAPI_ROOT" "$ONEAPI_ROOT"
  # shellcheck disable=SC2016 # printed for the reader: expands when the printed command runs
  printf 'for d in ${LD_LIBRARY_PATH//:/ } %q/compiler/*/lib %q/*/latest/lib; do ls "$d"/libur_loader.so "$d"/libur_adapter_*.so "$d"/libze_loader.so.1; done\n' \
    "$ONEAPI_ROOT" "$ONEAPI_ROOT"
  [ -n "$XPUKIT_LDCONFIG" ] && printf '%s -p | grep -E %q\n' "$XPUKIT_LDCONFIG" 'libur_loader\.so|libze_loader\.so\.1'
  printf 'readlink -f <each library found>\n'
  exit 0
fi

status=0
# Basenames of the entries matching a glob (nothing when it matches nothing).
names() {
  local f out=''
  for f in "$@"; do [ -e "$f" ] && out+="$(basename "$f") "; done
  printf '%s' "${out% }"
}

oneapi=''
for d in "$ONEAPI_ROOT"/compiler/*/; do
  case $d in */latest/) ;; *) [ -d "$d" ] && oneapi+="$(basename "$d") " ;; esac
done
note "oneAPI compiler releases under $ONEAPI_ROOT: ${oneapi:-none}"

ur=$(find_lib libur_loader.so || true)
[ -n "$ur" ] || ur=$(find_lib libur_loader.so.0 || true)
if [ -n "$ur" ]; then
  note "ok   UR loader: $ur (version $(lib_version "$ur"))"
  adapters=$(names "$(dirname "$ur")"/libur_adapter_*.so)
  if [ -n "$adapters" ]; then
    note "ok   UR adapters next to it: $adapters"
  else
    note "warn no libur_adapter_*.so next to $ur: UR will find no platform"
  fi
  case $adapters in
    *level_zero*) ;;
    *) note "warn no Level Zero adapter (libur_adapter_level_zero.so): Intel GPUs will not be visible through UR" ;;
  esac
else
  note "fail UR loader libur_loader.so not found (searched LD_LIBRARY_PATH, $ONEAPI_ROOT/compiler/*/lib, ldconfig)"
  note "     fix: use the Deep Learning Essentials base image (oneAPI compiler runtime), or pip install intel-cmplr-lib-ur intel-cmplr-lib-rt"
  status=1
fi

ze=$(find_lib libze_loader.so.1 || true)
if [ -n "$ze" ]; then
  note "ok   Level Zero loader: $ze (version $(lib_version "$ze"))"
else
  note "fail Level Zero loader libze_loader.so.1 not found"
  note "     fix: install libze1 (or level-zero) from Intel's GPU package repository in the image"
  status=1
fi
exit "$status"
