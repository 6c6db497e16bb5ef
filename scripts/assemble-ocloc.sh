#!/usr/bin/env bash
# Assemble ocloc, IGC and iga64 from Debian packages of a newer suite (forky) into one self-contained
# folder that runs on the image's older glibc: the packages' own loader, libc, libm, libstdc++, libgcc_s
# and zlib sit beside them in OCLOC_PREFIX/lib, reached only through the wrappers in OCLOC_PREFIX/bin
# (never on the image's library path). Every .deb is checked against its pinned SHA-256 before it is
# unpacked. apt gets its own sources list, lists folder and status file: the image's apt setup is
# never touched.
#   OCLOC_DEBS="NAME=VERSION/SHA256 ..."  the .debs, exact versions (env/pins.toml [cpu.ocloc.debs])
#   OCLOC_MIRROR, OCLOC_SUITE             where apt finds them (a snapshot.debian.org URL works too)
#   OCLOC_PACKAGE                         the package that carries ocloc (intel-ocloc)
#   OCLOC_PREFIX                          the folder to fill (the runtime stage copies it as is)
#   assemble-ocloc.sh [--dry-run]
set -euo pipefail

SCRIPT_NAME=assemble-ocloc
# shellcheck source=SCRIPTDIR/common.sh
. "$(dirname "$0")/common.sh"

usage() { sed -n '2,12p' "$0"; }
parse_args "$@"

OCLOC_DEBS=${OCLOC_DEBS:-}
OCLOC_MIRROR=${OCLOC_MIRROR:-}
OCLOC_SUITE=${OCLOC_SUITE:-}
OCLOC_PACKAGE=${OCLOC_PACKAGE:-intel-ocloc}
OCLOC_PREFIX=${OCLOC_PREFIX:-}
# apt's state for this stage alone, on a cache mount under /run (the Dockerfile says why): lists and
# downloads survive between builds, the image's own /etc/apt and /var/lib/apt are never read.
STATE=${OCLOC_APT_STATE:-/run/xpukit-ocloc-apt/state}
WORK=${OCLOC_WORK:-/tmp/xpukit-ocloc}
PIN_FILE="env/pins.toml [cpu.ocloc.debs]"

[[ -n $OCLOC_DEBS ]] || die "OCLOC_DEBS is not set" "invoke build sets it from $PIN_FILE"
[[ -n $OCLOC_MIRROR && -n $OCLOC_SUITE ]] || die "OCLOC_MIRROR or OCLOC_SUITE is not set" "invoke build sets them from env/pins.toml [cpu.ocloc]"
[[ -n $OCLOC_PREFIX ]] || die "OCLOC_PREFIX is not set" "invoke build sets it (xpukit/layout.py COMPILER)"

names=() versions=() sums=()
for spec in $OCLOC_DEBS; do
  name=${spec%%=*} rest=${spec#*=}
  version=${rest%/*} sum=${rest##*/}
  if [[ $spec != *=*/* || -z $name || -z $version ]]; then
    die "OCLOC_DEBS entry '$spec' is not NAME=VERSION/SHA256" "invoke build writes it from $PIN_FILE"
  fi
  [[ $sum =~ ^[0-9a-f]{64}$ ]] || die "$name $version: pinned SHA-256 '$sum' is not 64 hex digits" "copy the SHA256 field of the mirror's index into $PIN_FILE"
  names+=("$name") versions+=("$version") sums+=("$sum")
done

apt_state_opts=(
  -o Dpkg::Use-Pty=0
  -o "Dir::Etc::sourcelist=$STATE/sources.list" -o Dir::Etc::sourceparts=/dev/null
  -o "Dir::State::Lists=$STATE/lists" -o "Dir::State::status=$STATE/status" -o "Dir::Cache=$STATE/cache"
  # A snapshot.debian.org suite's Release file is past its Valid-Until; the trust anchor here is the
  # pinned SHA-256 of each .deb, checked below whatever the index says.
  -o Acquire::Check-Valid-Until=false
  -o APT::Sandbox::User=root
)
if [[ -s ${CA_BUNDLE_FILE:-/run/secrets/ca_bundle} ]]; then
  apt_state_opts+=(-o "Acquire::https::CAInfo=${CA_BUNDLE_FILE:-/run/secrets/ca_bundle}")
fi

note "ocloc, IGC and iga64 from Debian $OCLOC_SUITE at $OCLOC_MIRROR into $OCLOC_PREFIX"
run mkdir -p "$STATE/lists/partial" "$STATE/cache/archives/partial" "$WORK/debs" "$WORK/root"
run touch "$STATE/status"
write_lines "$STATE/sources.list" "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $OCLOC_MIRROR $OCLOC_SUITE main"
run apt-get "${apt_state_opts[@]}" update -q

# A pinned version that left the mirror is one error naming the pin and what the mirror has now:
# never another version silently.
for i in "${!names[@]}"; do
  name=${names[$i]} version=${versions[$i]}
  if [[ $DRY_RUN = 1 ]]; then
    printf '%s >/dev/null\n' "$(quote_cmd apt-cache "${apt_state_opts[@]}" show "$name=$version")"
    continue
  fi
  if ! apt-cache "${apt_state_opts[@]}" show "$name=$version" >/dev/null 2>&1; then
    now=$(apt-cache "${apt_state_opts[@]}" show "$name" 2>/dev/null | sed -n 's/^Version: //p' | paste -sd, - || true)
    die "Debian $OCLOC_SUITE at $OCLOC_MIRROR no longer has $name $version (pinned in $PIN_FILE; it has: ${now:-nothing})" \
      "move the pin to a version it has with that .deb's SHA256 (docs/zebin.md, \"Moving the compiler pins\"), or set XPUKIT_OCLOC_MIRROR to a snapshot.debian.org URL that has $version"
  fi
done

specs=()
for i in "${!names[@]}"; do specs+=("${names[$i]}=${versions[$i]}"); done
run_in "$WORK/debs" apt-get "${apt_state_opts[@]}" download "${specs[@]}"

# Each .deb against its pinned SHA-256, before anything is unpacked.
for i in "${!names[@]}"; do
  name=${names[$i]} version=${versions[$i]} sum=${sums[$i]}
  # apt names the file NAME_VERSION_ARCH.deb with the epoch's colon written %3a.
  deb="$WORK/debs/${name}_${version/:/%3a}_amd64.deb"
  if [[ $DRY_RUN = 1 ]]; then
    printf 'echo %s | sha256sum -c --quiet -\n' "$(quote_cmd "$sum  $deb")"
    continue
  fi
  [[ -f $deb ]] || die "apt downloaded no $deb for $name $version" "rerun the build; the mirror may be syncing"
  have=$(sha256sum "$deb" | cut -d' ' -f1)
  if [[ $have != "$sum" ]]; then
    die "$name $version: the .deb's SHA-256 is $have, pinned $sum (nothing was unpacked)" \
      "if the mirror rebuilt the package, check it and copy the SHA256 field of its index into $PIN_FILE"
  fi
done
note "every .deb matches its pinned SHA-256"
for i in "${!names[@]}"; do
  run dpkg-deb -x "$WORK/debs/${names[$i]}_${versions[$i]/:/%3a}_amd64.deb" "$WORK/root"
done

# The folder: lib/ (forky's loader and runtime, libocloc, libigc, libiga64), libexec/ (the real
# programs), bin/ (the wrappers users run), PACKAGES (what it is made of, for the manifest and caches).
lib="$WORK/root/usr/lib/x86_64-linux-gnu"
run rm -rf "$OCLOC_PREFIX"
run mkdir -p "$OCLOC_PREFIX/bin" "$OCLOC_PREFIX/lib" "$OCLOC_PREFIX/libexec"
# cp -P keeps each soname link beside the file it names: libigc.so.2 -> libigc.so.2.40.14+0 says the version.
for pattern in ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libgcc_s.so.1 'libstdc++.so.6*' 'libz.so.1*' \
  libocloc.so 'libigc.so.2*' 'libiga64.so.2*'; do
  if [[ $DRY_RUN = 1 ]]; then
    printf 'cp -P %s/%s %s/\n' "$(quote_cmd "$lib")" "$pattern" "$(quote_cmd "$OCLOC_PREFIX/lib")"
    continue
  fi
  # shellcheck disable=SC2206 # the pattern is a glob on purpose (versioned file names)
  matches=("$lib"/$pattern)
  [[ -e ${matches[0]} ]] || die "no $pattern in the unpacked .debs" "pin the package that ships it in $PIN_FILE"
  cp -P "${matches[@]}" "$OCLOC_PREFIX/lib/"
done
# The ocloc binary is versioned (ocloc-26.27.1; /usr/bin/ocloc is an alternatives link dpkg-deb does not make).
if [[ $DRY_RUN = 1 ]]; then
  printf 'cp %s/usr/bin/ocloc-* %s/libexec/ocloc\n' "$(quote_cmd "$WORK/root")" "$(quote_cmd "$OCLOC_PREFIX")"
else
  ocloc_bins=("$WORK/root"/usr/bin/ocloc-*)
  [[ ${#ocloc_bins[@]} -eq 1 && -f ${ocloc_bins[0]} ]] || die "expected one usr/bin/ocloc-* in $OCLOC_PACKAGE, found: ${ocloc_bins[*]}" "pin the $OCLOC_PACKAGE that ships it"
  cp "${ocloc_bins[0]}" "$OCLOC_PREFIX/libexec/ocloc"
fi
run cp "$WORK/root/usr/bin/iga64" "$OCLOC_PREFIX/libexec/iga64"

# --library-path replaces LD_LIBRARY_PATH and --inhibit-cache skips the image's ld.so.cache: forky's
# loader maps only this folder's libraries, whatever the caller's environment holds.
for tool in ocloc iga64; do
  # shellcheck disable=SC2016 # the wrapper's own $0 and $dir, expanded when it runs
  write_lines "$OCLOC_PREFIX/bin/$tool" '#!/bin/sh' \
    "# $tool from Debian $OCLOC_SUITE with its own loader and C/C++ runtime (xpukit: scripts/assemble-ocloc.sh)" \
    'dir=$(dirname "$(dirname "$(readlink -f "$0")")")' \
    "exec \"\$dir/lib/ld-linux-x86-64.so.2\" --inhibit-cache --library-path \"\$dir/lib\" \"\$dir/libexec/$tool\" \"\$@\""
  run chmod 0755 "$OCLOC_PREFIX/bin/$tool"
done
lines=()
for i in "${!names[@]}"; do lines+=("${names[$i]} ${versions[$i]} ${sums[$i]}"); done
write_lines "$OCLOC_PREFIX/PACKAGES" "# Debian $OCLOC_SUITE .debs this folder is made of: NAME VERSION SHA256" "${lines[@]}"
run rm -rf "$WORK"

# The folder runs here, on the image's own base: ocloc answers with the pinned version, iga64 starts.
if [[ $DRY_RUN = 1 ]]; then
  printf '(cd /tmp && %s query OCL_DRIVER_VERSION)\n' "$(quote_cmd "$OCLOC_PREFIX/bin/ocloc")"
  exit 0
fi
probe=$(mktemp -d)
(cd "$probe" && "$OCLOC_PREFIX/bin/ocloc" query OCL_DRIVER_VERSION >/dev/null) ||
  die "the assembled ocloc does not run on this base" "see the lines above; FACTS: forky's loader must come with its libc"
reported=$(tr -d ' \n\0' <"$probe/OCL_DRIVER_VERSION")
rm -rf "$probe"
for i in "${!names[@]}"; do [[ ${names[$i]} == "$OCLOC_PACKAGE" ]] && pinned=${versions[$i]}; done
[[ -n ${pinned:-} ]] || die "OCLOC_DEBS pins no $OCLOC_PACKAGE" "add it to $PIN_FILE"
# ocloc says 26.27.039122 for the package 26.27.39122.14-1: the first three numbers must agree.
IFS=. read -r p1 p2 p3 _ <<<"$pinned"
IFS=. read -r r1 r2 r3 _ <<<"$reported"
if [[ $((10#$p1)).$((10#$p2)).$((10#${p3%%-*})) != $((10#$r1)).$((10#$r2)).$((10#$r3)) ]]; then
  die "the assembled ocloc reports $reported, not the pinned $OCLOC_PACKAGE $pinned" "check OCLOC_DEBS against $PIN_FILE"
fi
"$OCLOC_PREFIX/bin/iga64" --help >/dev/null 2>&1 || die "the assembled iga64 does not run on this base" "see the lines above"
note "ocloc $reported ($OCLOC_PACKAGE $pinned) and iga64 run here; $(du -sh "$OCLOC_PREFIX" | cut -f1) in $OCLOC_PREFIX"
