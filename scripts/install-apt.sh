#!/usr/bin/env bash
# Install OS packages given as NAME=VERSION (exact pin) or NAME (unpinned: the kit warned at build
# time). Runs in the image build with apt's cache and lists on BuildKit cache mounts.
#   install-apt.sh [--dry-run] PACKAGE[=VERSION]...
set -euo pipefail

SCRIPT_NAME=install-apt
# shellcheck source=SCRIPTDIR/common.sh
. "$(dirname "$0")/common.sh"

if [[ "${1:-}" == "--dry-run" ]]; then DRY_RUN=1; shift; fi
if [[ "${1:-}" == "--help" ]]; then sed -n '2,4p' "$0"; exit 0; fi
if [[ $# -eq 0 ]]; then note "no packages requested; nothing to do"; exit 0; fi

# Debian's docker-clean hook empties apt's cache after every install, defeating the cache mount.
run rm -f /etc/apt/apt.conf.d/docker-clean
run mkdir -p "${apt_cache_dirs[@]}"
write_lines /etc/apt/apt.conf.d/keep-cache 'Binary::apt::APT::Keep-Downloaded-Packages "true";'
run apt-get "${apt_opts[@]}" update -q
run apt-get "${apt_opts[@]}" install -y -q --no-install-recommends "$@"
