#!/usr/bin/env bash
# Install ocloc, Intel's offline GPU compiler (SPIR-V -> zebin). oneAPI does not ship it.
#   OCLOC_SOURCE=apt             OCLOC_PACKAGE (e.g. intel-opencl-icd) at OCLOC_VERSION from the
#                                base image's own archive (Debian ships ocloc in intel-opencl-icd)
#   OCLOC_SOURCE=intel-gpu-repo  intel-ocloc from Intel's GPU package repository, at OCLOC_VERSION,
#                                or, when that is empty, at the version of the compute runtime
#                                already in the base image; OCLOC_IGC_PACKAGE (libigc2) kept at the
#                                version that runtime came with, and both held (apt-mark hold)
#   OCLOC_SOURCE=debian-folder   nothing here: the Dockerfile's ocloc-folder stage assembles it
#                                (scripts/assemble-ocloc.sh) and the runtime stage copies it
#   install-ocloc.sh [--dry-run]
set -euo pipefail

SCRIPT_NAME=install-ocloc
# shellcheck source=SCRIPTDIR/common.sh
. "$(dirname "$0")/common.sh"

if [[ "${1:-}" == "--dry-run" ]]; then DRY_RUN=1; shift; fi
if [[ "${1:-}" == "--help" ]]; then sed -n '2,11p' "$0"; exit 0; fi

[[ -n "${OCLOC_SOURCE:-}" ]] || die "OCLOC_SOURCE is not set" "set OCLOC_SOURCE=apt, intel-gpu-repo or debian-folder (invoke build sets it from env/pins.toml)"
[[ -n "${OCLOC_PACKAGE:-}" ]] || die "OCLOC_PACKAGE is not set" "set OCLOC_PACKAGE, e.g. intel-opencl-icd (invoke build sets it from env/pins.toml)"
OCLOC_VERSION="${OCLOC_VERSION:-}"
OCLOC_IGC_PACKAGE="${OCLOC_IGC_PACKAGE:-}"
INTEL_GPU_REPO_URL="${INTEL_GPU_REPO_URL:-https://repositories.intel.com/gpu/ubuntu}"
INTEL_GPU_REPO_KEY="${INTEL_GPU_REPO_KEY:-https://repositories.intel.com/gpu/intel-graphics.key}"

curl_opts=(-fsSL)
if [[ -s ${CA_BUNDLE_FILE:-/run/secrets/ca_bundle} ]]; then
  curl_opts+=(--cacert "${CA_BUNDLE_FILE:-/run/secrets/ca_bundle}")
fi

case "$OCLOC_SOURCE" in
  debian-folder)
    note "$OCLOC_PACKAGE comes from the ocloc-folder stage (scripts/assemble-ocloc.sh); nothing to install here"
    exit 0
    ;;
  apt)
    spec="$OCLOC_PACKAGE${OCLOC_VERSION:+=$OCLOC_VERSION}"
    run apt-get "${apt_opts[@]}" install -y -q --no-install-recommends "$spec"
    ;;
  intel-gpu-repo)
    if [[ -z "$OCLOC_VERSION" ]]; then
      # Match the compute runtime the base image carries, so ocloc and the driver agree on targets.
      for runtime in libze-intel-gpu1 intel-opencl-icd intel-level-zero-gpu; do
        OCLOC_VERSION="$(dpkg-query -W -f='${Version}' "$runtime" 2>/dev/null || true)"
        [[ -n "$OCLOC_VERSION" ]] && { echo "ocloc: matching $runtime $OCLOC_VERSION"; break; }
      done
      [[ -z "$OCLOC_VERSION" ]] && echo "ocloc: warning: no compute runtime found in the base image; installing the repository's current $OCLOC_PACKAGE (unpinned)"
    fi
    # ocloc compiles with the IGC beside it: the repository's newest ocloc would pull a newer IGC
    # than the runtime's and the two would disagree on targets. Keep the base image's IGC.
    igc_spec=()
    if [[ -n "$OCLOC_IGC_PACKAGE" ]]; then
      igc_version="$(dpkg-query -W -f='${Version}' "$OCLOC_IGC_PACKAGE" 2>/dev/null || true)"
      if [[ -n "$igc_version" ]]; then
        echo "ocloc: keeping $OCLOC_IGC_PACKAGE $igc_version (the base image's)"
        igc_spec=("$OCLOC_IGC_PACKAGE=$igc_version")
      else
        echo "ocloc: warning: $OCLOC_IGC_PACKAGE is not in the base image; the one $OCLOC_PACKAGE depends on comes with it"
        igc_spec=("$OCLOC_IGC_PACKAGE")
      fi
    fi
    # shellcheck disable=SC1091 # the base image's own file, read at build time
    codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-noble}")"
    run apt-get "${apt_opts[@]}" install -y -q --no-install-recommends ca-certificates curl gnupg
    if [[ $DRY_RUN -eq 1 ]]; then
      echo "$(quote_cmd curl "${curl_opts[@]}" "$INTEL_GPU_REPO_KEY") | gpg --dearmor --yes -o /usr/share/keyrings/intel-graphics.gpg"
    else
      curl "${curl_opts[@]}" "$INTEL_GPU_REPO_KEY" | gpg --dearmor --yes -o /usr/share/keyrings/intel-graphics.gpg
    fi
    line="deb [arch=amd64 signed-by=/usr/share/keyrings/intel-graphics.gpg] $INTEL_GPU_REPO_URL $codename unified"
    write_lines /etc/apt/sources.list.d/intel-gpu.list "$line"
    run apt-get "${apt_opts[@]}" update -q
    run apt-get "${apt_opts[@]}" install -y -q --no-install-recommends "$OCLOC_PACKAGE${OCLOC_VERSION:+=$OCLOC_VERSION}" "${igc_spec[@]}"
    # Held together: no later apt step moves one without the other (the manifest checks the pair).
    run apt-mark hold "$OCLOC_PACKAGE" ${OCLOC_IGC_PACKAGE:+"$OCLOC_IGC_PACKAGE"}
    ;;
  *)
    die "unknown OCLOC_SOURCE '$OCLOC_SOURCE'" "use OCLOC_SOURCE=apt, intel-gpu-repo or debian-folder"
    ;;
esac
if [[ $DRY_RUN -eq 0 ]] && ! have ocloc; then
  echo "error: install-ocloc.sh: ocloc is not on PATH after installing $OCLOC_PACKAGE" >&2
  exit 1
fi
