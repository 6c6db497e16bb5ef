#!/usr/bin/env bash
# Remove what an image build writes that records WHEN it ran, so that two builds of one commit give
# identical layers (docs/reproducible.md): apt's and dpkg's logs, ldconfig's aux-cache (inode
# numbers and change times), and the password-change day useradd writes into /etc/shadow for USER.
# Run at the end of every RUN that installs packages or adds a user.
#   clean-build-noise.sh [--dry-run] [USER...]
set -euo pipefail

dry_run=0
if [[ "${1:-}" == "--dry-run" ]]; then dry_run=1; shift; fi
if [[ "${1:-}" == "--help" ]]; then sed -n '2,6p' "$0"; exit 0; fi

run() { echo "+ $*"; if [[ $dry_run -eq 0 ]]; then "$@"; fi; }

run rm -f /var/log/apt/history.log /var/log/apt/term.log /var/log/apt/eipp.log.xz \
  /var/log/dpkg.log /var/log/alternatives.log /var/cache/ldconfig/aux-cache
for user in "$@"; do
  # Field 3 is the day of the last password change; empty means "no aging", as for a fresh base.
  run sed -i -E "s/^(${user}:[^:]*):[0-9]+:/\\1::/" /etc/shadow
done
