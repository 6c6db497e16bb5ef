# Sourced by install-apt.sh and install-ocloc.sh: apt's options during the image build.
#
# One cache mount, /var/cache/xpukit-apt, holds apt's downloads, package cache and lists, because
# buildah < 1.29 (podman builds) unlocks only the last `sharing=locked` mount of a RUN, and a second
# locked mount hangs the next RUN that uses it (buildah #4349). The lists sit one folder down:
# `apt-get update` deletes every file it does not know from the lists folder, buildah's lock file
# among them (buildah #4342).
# shellcheck shell=bash
APT_CACHE_ROOT=/var/cache/xpukit-apt
apt_opts=(-o Dpkg::Use-Pty=0 -o "Dir::Cache=$APT_CACHE_ROOT" -o "Dir::State::Lists=$APT_CACHE_ROOT/lists")
# A CA bundle given as a BuildKit secret (invoke build --ca-bundle) lets apt reach https mirrors
# behind TLS-intercepting proxies; it is read in place and never copied into the image.
if [[ -s /run/secrets/ca_bundle ]]; then
  apt_opts+=(-o "Acquire::https::CAInfo=/run/secrets/ca_bundle")
fi
# Folders apt expects under its cache and lists (created inside the mount, never in a layer).
apt_cache_dirs=("$APT_CACHE_ROOT/archives/partial" "$APT_CACHE_ROOT/lists/partial")
