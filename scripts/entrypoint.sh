#!/usr/bin/env bash
# Prepare the environment, then run the command. oneAPI images (xpu profile) get setvars.sh
# sourced once; images that already carry its environment (SETVARS_COMPLETED=1) and the cpu
# profile, which has no oneAPI, are left alone.
set -e
if [[ -z "${SETVARS_COMPLETED:-}" && -f /opt/intel/oneapi/setvars.sh ]]; then
  # shellcheck disable=SC1091
  source /opt/intel/oneapi/setvars.sh >/dev/null 2>&1 || echo "entrypoint: warning: oneAPI setvars.sh failed" >&2
fi
# Triton and the Intel backend need a writable cache and temp dir even under --read-only.
# A read-only cache folder is fine (the kit falls back to a private one under the temp dir);
# a read-only temp dir is not: say so once, here, in one line.
mkdir -p "${TRITON_CACHE_DIR:-$HOME/.triton}" "${TMPDIR:-/tmp}" 2>/dev/null || true
if [[ ! -w "${TMPDIR:-/tmp}" ]]; then
  echo "entrypoint: warning: ${TMPDIR:-/tmp} is not writable; Triton and ocloc need it (fix: docker run --tmpfs /tmp)" >&2
fi
exec "$@"
