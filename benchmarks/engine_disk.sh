#!/usr/bin/env bash
# The disk a set of engine tests holds at its peak: runs pytest with a basetemp of its own and samples,
# every few seconds, the free space of the filesystem holding it (df) and, less often, `du` of what
# the tests make (pytest's basetemp: podman stores, registries; verify's /var/tmp/xpukit-verify-*).
#
#   bash benchmarks/engine_disk.sh OUT -- tests/engine/test_podman.py tests/engine/test_verify.py ...
#
# Writes OUT/df.tsv (epoch, free KiB), OUT/du.tsv (epoch, KiB under basetemp, KiB in verify's folders),
# OUT/pytest.log, and prints the wall time, the lowest free space and the peak of the du sums.
# Free space counts every user of the disk (a shared machine); the du sums count these tests only.
set -uo pipefail
out=$1; shift; [[ ${1:-} == -- ]] && shift
mkdir -p "$out"; out=$(cd "$out" && pwd)
base="$out/basetemp"; rm -rf "$base"
declare -A before=()
for d in /var/tmp/xpukit-verify-*; do [[ -e $d ]] && before[$d]=1; done
sample() {
  local n=0 verify d
  while :; do
    echo "$(date +%s) $(df -Pk "$out" | awk 'NR==2 {print $4}')" >>"$out/df.tsv"
    if (( n % 4 == 0 )); then
      verify=0
      for d in /var/tmp/xpukit-verify-*; do
        [[ -e $d && -z ${before[$d]:-} ]] || continue
        verify=$(( verify + $(du -skx "$d" 2>/dev/null | awk '{print $1}') ))
      done
      echo "$(date +%s) $(du -skx "$base" 2>/dev/null | awk '{print $1+0}') $verify" >>"$out/du.tsv"
    fi
    n=$(( n + 1 )); sleep 5
  done
}
: >"$out/df.tsv"; : >"$out/du.tsv"
sample & sampler=$!
trap 'kill $sampler 2>/dev/null' EXIT
t0=$(date +%s)
nice -n 10 python -m pytest -p no:cacheprovider --basetemp "$base" "$@" >"$out/pytest.log" 2>&1
code=$?
t1=$(date +%s)
kill $sampler 2>/dev/null; wait $sampler 2>/dev/null
tail -3 "$out/pytest.log"
awk -v w=$((t1 - t0)) -v c=$code 'NR==1 {start=$2; low=$2} $2<low {low=$2}
  END {printf "wall %d s, pytest exit %d; free at start %.1f GB, lowest %.1f GB (%.1f GB below start)\n", w, c, start/1048576, low/1048576, (start-low)/1048576}' "$out/df.tsv"
awk '{s=$2+$3} s>peak {peak=s; at=$1; b=$2; v=$3} END {printf "du peak %.1f GB (basetemp %.1f GB, verify folders %.1f GB) at %s\n", peak/1048576, b/1048576, v/1048576, at}' "$out/du.tsv"
exit $code
