#!/usr/bin/env bash
# Install Intel OMIX on a plain Ubuntu base (invoke build --base omix): one package holding the GPU
# user-mode driver and Deep Learning Essentials, laid out under /opt/intel/oneapi as DLE is.
# Nothing to do when OMIX_PACKAGE is empty (the DLE base image already carries oneAPI).
#   install-omix.sh [--dry-run] [--help]
set -euo pipefail

SCRIPT_NAME=install-omix
# shellcheck source=SCRIPTDIR/common.sh
. "$(dirname "$0")/common.sh"

usage() {
  cat <<'USAGE'
usage: install-omix.sh [--dry-run] [--help]

Environment (the Dockerfile passes its build args under the same names):
  OMIX_PACKAGE   intel-omix-dev; empty: not an OMIX build, nothing is installed
  OMIX_VERSION   exact apt version; empty: the repository's current one (said so)
  OMIX_APT_REPO  the apt line of the repository carrying the package (required with OMIX_PACKAGE)
  OMIX_APT_KEY   URL of that repository's signing key, dearmored to /usr/share/keyrings/intel-omix.gpg
  ONEAPI_ROOT    where the package must have put setvars.sh, default /opt/intel/oneapi
--dry-run prints the exact commands and runs nothing.
USAGE
}

parse_args "$@"

OMIX_PACKAGE=${OMIX_PACKAGE:-}
OMIX_VERSION=${OMIX_VERSION:-}
OMIX_APT_REPO=${OMIX_APT_REPO:-}
OMIX_APT_KEY=${OMIX_APT_KEY:-}
ONEAPI_ROOT=${ONEAPI_ROOT:-/opt/intel/oneapi}

if [ -z "$OMIX_PACKAGE" ]; then
  note "OMIX_PACKAGE is empty: not an OMIX build, nothing to install"
  exit 0
fi
if [ -z "$OMIX_APT_REPO" ]; then
  die "OMIX_APT_REPO is empty: the apt repository carrying $OMIX_PACKAGE is not pinned" \
    "fill xpu.omix.apt_repo in env/pins.toml with that repository's apt line, or build without --base omix"
fi
[ -n "$OMIX_VERSION" ] || note "OMIX_VERSION is empty: installing the repository's current $OMIX_PACKAGE (unpinned; the manifest records what came)"

run mkdir -p "${apt_cache_dirs[@]}"
run apt-get "${apt_opts[@]}" update -q
run apt-get "${apt_opts[@]}" install -y -q --no-install-recommends ca-certificates curl gnupg
if [ -n "$OMIX_APT_KEY" ]; then
  curl_opts=(-fsSL)
  if [[ -s ${CA_BUNDLE_FILE:-/run/secrets/ca_bundle} ]]; then curl_opts+=(--cacert "${CA_BUNDLE_FILE:-/run/secrets/ca_bundle}"); fi
  if [ "$DRY_RUN" = 1 ]; then
    echo "$(quote_cmd curl "${curl_opts[@]}" "$OMIX_APT_KEY") | gpg --dearmor --yes -o /usr/share/keyrings/intel-omix.gpg"
  else
    curl "${curl_opts[@]}" "$OMIX_APT_KEY" | gpg --dearmor --yes -o /usr/share/keyrings/intel-omix.gpg
  fi
fi
write_lines /etc/apt/sources.list.d/intel-omix.list "$OMIX_APT_REPO"
run apt-get "${apt_opts[@]}" update -q
run apt-get "${apt_opts[@]}" install -y -q --no-install-recommends "$OMIX_PACKAGE${OMIX_VERSION:+=$OMIX_VERSION}"
# The driver and oneAPI it carries move together, and only when the pins say so.
run apt-mark hold "$OMIX_PACKAGE"
if [ "$DRY_RUN" != 1 ] && [ ! -f "$ONEAPI_ROOT/setvars.sh" ]; then
  die "$OMIX_PACKAGE is installed but $ONEAPI_ROOT/setvars.sh is missing" \
    "check the package's layout (dpkg -L $OMIX_PACKAGE) and set ONEAPI_ROOT"
fi
note "$OMIX_PACKAGE installed under $ONEAPI_ROOT"
