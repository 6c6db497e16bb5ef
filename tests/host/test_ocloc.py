"""xpukit.runtime.offline.ocloc: version, flag dialect, device list, SPIR-V -> zebin, spill retry, errors.

Unit tests drive a fake ``ocloc`` (a small shell script written to tmp_path) so the dialect and
retry logic are checked where no ocloc is installed; container tests use the real one.
"""

from __future__ import annotations

import shlex
import shutil
import stat
from pathlib import Path

import pytest

from xpukit.errors import XpukitError
from xpukit.runtime.offline.ocloc import (
    LARGE_GRF_FLAG,
    Ocloc,
    OclocError,
    UnsupportedDeviceError,
    find_ocloc,
    parse_device_list,
)

HELP_22_43 = (
    "Usage: ocloc [compile] -file <filename> -device <device_type> [-output <filename>]\n"
    "  -device <device_type>         Target device.\n"
    "                                <device_type> can be: bdw, skl, tgllp, dg1, acm-g10, dg2-g10, "
    "pvc-sdv, pvc, xe-hpc, version  or hexadecimal value with 0x prefix\n"
    "                                - can be single or multiple target devices.\n"
)

FAKE = r"""#!/bin/sh
# Fake ocloc for tests. Records each call, acts like ocloc @VER@.
echo "$@" >> "$(dirname "$0")/calls.log"
if [ "$1" = "query" ]; then echo "@VER@ " > OCL_DRIVER_VERSION; exit 0; fi
if [ "$2" = "--help" ]; then
  echo "  -device <device_type>  Target device."
  echo "                         <device_type> can be: pvc, acm-g10, bmg, version  or hexadecimal value"
  exit 0
fi
out=""; outdir="."; opts=""; prev=""
for a in "$@"; do
  case "$prev" in
    -output) out="$a";; -out_dir) outdir="$a";; -o) out="$a";; -options) opts="$a";;
  esac
  prev="$a"
done
if [ -n "$FAKE_OCLOC_FAIL" ]; then echo "error: fake failure for $out"; exit 3; fi
case "$opts" in
  *256-GRF*) echo "Build succeeded.";;
  *) if [ -n "$FAKE_OCLOC_SPILL" ]; then
       echo "warning: kernel k compiled SIMD16 allocated 128 regs and spilled around 217"; fi
     echo "Build succeeded.";;
esac
case "$out" in
  /*) target="$out";; *) target="$outdir/$out";;
esac
SUFFIX
exit 0
"""


def make_fake(tmp_path: Path, version: str, modern: bool) -> Path:
    # Modern ocloc appends ".bin" to the -o name; 22.x with -output_no_suffix writes the bare name.
    write = 'printf "ZEBIN-$opts" > "$target.bin"' if modern else 'printf "ZEBIN-$opts" > "$target"'
    folder = tmp_path / f"fake-{version}"
    folder.mkdir()
    script = folder / "ocloc"
    script.write_text(FAKE.replace("@VER@", version).replace("SUFFIX", write))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


@pytest.mark.unit
def test_parse_device_list_from_22_43_help():
    devices = parse_device_list(HELP_22_43)
    assert devices == ["bdw", "skl", "tgllp", "dg1", "acm-g10", "dg2-g10", "pvc-sdv", "pvc", "xe-hpc"]
    assert parse_device_list("no device list here") == []


@pytest.mark.unit
def test_dialect_follows_version(tmp_path):
    spv = tmp_path / "k.spv"
    old = Ocloc("/x/ocloc", "22.43.24595").command(spv, "pvc", "-cl-fast", tmp_path)
    assert "-o" not in old
    assert old[old.index("-output") + 1] == "k" and "-output_no_suffix" in old
    assert old[old.index("--format") + 1] == "zebin"
    assert old[old.index("-options") + 1] == "-cl-fast"
    new = Ocloc("/x/ocloc", "25.18.33578").command(spv, "pvc", "", tmp_path)
    assert "-output" not in new and "--format" not in new and "-options" not in new
    assert new[new.index("-o") + 1] == str(tmp_path / "k.zebin")


@pytest.mark.unit
@pytest.mark.parametrize(("version", "modern"), [("22.43.24595", False), ("25.18.33578", True)])
def test_fake_ocloc_compile_and_spill_retry(tmp_path, monkeypatch, version, modern):
    tool = find_ocloc(str(make_fake(tmp_path, version, modern)))
    assert tool.version == version
    assert tool.legacy_flags is not modern
    assert tool.devices == {"pvc", "acm-g10", "bmg"}
    plain = tool.compile_spirv(b"\x03\x02\x23\x07", "pvc", "-cl-x")
    assert plain.zebin == b"ZEBIN--cl-x" and not plain.retried_large_grf
    monkeypatch.setenv("FAKE_OCLOC_SPILL", "1")
    spilled = tool.compile_spirv(b"\x03\x02\x23\x07", "pvc", "-cl-x")
    assert spilled.retried_large_grf
    assert spilled.build_flags == f"-cl-x {LARGE_GRF_FLAG}"
    assert spilled.zebin == f"ZEBIN--cl-x {LARGE_GRF_FLAG}".encode()
    assert "spilled" in spilled.log
    calls = (tmp_path / f"fake-{version}" / "calls.log").read_text().splitlines()
    compiles = [c for c in calls if c.startswith("compile -file")]
    assert len(compiles) == 3  # one plain build, then exactly one retry (not a loop)
    # Already at 256 GRF: no retry even though the fake would not spill anyway.
    again = tool.compile_spirv(b"\x03\x02\x23\x07", "pvc", LARGE_GRF_FLAG)
    assert not again.retried_large_grf


@pytest.mark.unit
def test_fake_ocloc_failure_carries_log_and_repro(tmp_path, monkeypatch):
    tool = find_ocloc(str(make_fake(tmp_path, "22.43.24595", False)))
    monkeypatch.setenv("FAKE_OCLOC_FAIL", "1")
    with pytest.raises(OclocError) as info:
        tool.compile_spirv(b"\x03\x02\x23\x07", "pvc")
    err = info.value
    assert "fake failure" in err.log and "fake failure" in str(err)
    assert "exit code 3" in str(err)
    assert "repro:" in err.one_line() and "\n" not in err.one_line()
    # The repro is one shell line and the input it names is kept.
    spv = Path(shlex.split(err.repro.split("&&", 1)[1])[3])
    assert spv.read_bytes() == b"\x03\x02\x23\x07"
    shutil.rmtree(spv.parent)


@pytest.mark.unit
def test_fake_ocloc_unsupported_device_and_targets(tmp_path):
    tool = find_ocloc(str(make_fake(tmp_path, "22.43.24595", False)))
    assert tool.require_target("bmg") == "bmg"
    with pytest.raises(UnsupportedDeviceError, match=r"ocloc 22\.43\.24595 .* cannot target 'lnl'") as info:
        tool.require_target("lnl")
    assert "intel-ocloc" in info.value.fix and "pvc" in info.value.fix
    with pytest.raises(UnsupportedDeviceError):
        tool.compile_spirv(b"", "mtl")
    with pytest.raises(XpukitError, match="unknown target 'gpu9000'"):
        tool.require_target("gpu9000")
    with pytest.raises(XpukitError, match="no zebin"):
        tool.require_target("cpu")


@pytest.mark.unit
def test_missing_ocloc_is_an_error(tmp_path):
    with pytest.raises(OclocError, match="ocloc not found"):
        find_ocloc(str(tmp_path / "no-such-ocloc"))


# --- real ocloc -----------------------------------------------------------------------------------
