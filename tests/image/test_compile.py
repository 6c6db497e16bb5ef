"""xpukit.runtime.kernels.compile: the logic behind ``invoke compile`` and ``invoke zebin-info``."""

from __future__ import annotations

import json
import os
import shutil
import stat

import pytest

from tests.support import ROOT
from xpukit.errors import EXIT_USAGE, UsageError, XpukitError
from xpukit.runtime.kernels.compile import KernelCompileError, run_compile
from xpukit.runtime.kernels.zebin_info import run_zebin_info
from xpukit.runtime.offline.ocloc import OclocError, find_ocloc
from xpukit.runtime.offline.zebin import ZebinError

EXAMPLES = ROOT / "examples" / "kernels.py"


@pytest.mark.sharing_smoke
@pytest.mark.container
def test_readme_example(env, capsys):
    """The README's command, with the example kernel's declared signature and constexprs."""
    out = env / "build" / "zebin"
    assert run_compile(f"{EXAMPLES}:scale_kernel", ["pvc", "acm-g10"], out, None, []) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[1].split() == ["target", "size", "B", "SIMD", "GRF", "scratch", "B/thr"]
    for target in ("pvc", "acm-g10"):
        files = {p.name for p in (out / target).iterdir()}
        assert files == {"scale_kernel.spv", "scale_kernel.zebin", "scale_kernel.json"}
        row = next(line.split() for line in table.splitlines() if line.startswith(target + " "))
        zebin = (out / target / "scale_kernel.zebin").read_bytes()
        assert int(row[1]) == len(zebin)
        record = json.loads((out / target / "scale_kernel.json").read_text())
        assert record["metadata"]["name"] == "scale_kernel" and record["metadata"]["binary_ext"] == "zebin"
        assert record["ocloc"]["version"] == find_ocloc().version
        assert [a["name"] for a in record["arguments"]] == ["x_ptr", "y_ptr", "a", "n"]
        assert [a["size"] for a in record["arguments"]] == [8, 8, 4, 4]
        assert record["signature"]["BLOCK"] == "constexpr"
        assert int(row[2]) == record["zebin"]["simd_size"] and int(row[3]) == record["zebin"]["grf_count"]


@pytest.mark.container
def test_command_line_signature_and_constexprs_override(env):
    out = env / "o"
    sig = "x_ptr:*fp32, y_ptr:*fp32, a:fp32, n:i64"
    assert run_compile(f"{EXAMPLES}:scale_kernel", ["pvc"], str(out), sig, ["BLOCK=256"], num_warps="2") == 0
    record = json.loads((out / "pvc" / "scale_kernel.json").read_text())
    assert record["constexprs"] == {"BLOCK": 256}
    assert record["metadata"]["num_warps"] == 2
    assert record["arguments"][3]["size"] == 8 and record["arguments"][3]["triton_type"] == "i64"


@pytest.mark.container
def test_zebin_info(env, capsys):
    run_compile(f"{EXAMPLES}:row_sum_kernel", ["pvc"], env / "o", None, [])
    capsys.readouterr()
    path = env / "o" / "pvc" / "row_sum_kernel.zebin"
    assert run_zebin_info(path) == 0
    text = capsys.readouterr().out
    assert "kernel row_sum_kernel:" in text and "EM_INTELGT" in text and "local" in text
    assert run_zebin_info(path, as_json=True) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kernels"][0]["name"] == "row_sum_kernel"
    bad = env / "not.zebin"
    bad.write_text("hello")
    with pytest.raises(ZebinError, match="not an ELF"):
        run_zebin_info(bad)


@pytest.mark.container
def test_unknown_target(env):
    with pytest.raises(XpukitError, match="cannot target 'pvc2'"):
        run_compile(f"{EXAMPLES}:scale_kernel", ["pvc,pvc2"], env / "o", None, [])
    assert not (env / "o").exists()  # nothing written before the targets were validated


@pytest.mark.container
def test_an_out_folder_that_cannot_be_written_is_one_line_before_compiling(env):
    """--out under a file, or in a folder this user cannot write: one UsageError (exit 2) before any
    compile, and nothing made. Before: a PermissionError traceback from the first mkdir."""
    (env / "a_file").write_text("")
    locked = env / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    cases = [(env / "a_file" / "o", "is not a folder")]
    if not os.access(locked, os.W_OK):  # root writes anywhere: that case is only for other users
        cases.append((locked / "o", "permission denied"))
    for out, problem in cases:
        with pytest.raises(UsageError, match=problem) as caught:
            run_compile(f"{EXAMPLES}:scale_kernel", ["pvc"], out, None, [])
        assert caught.value.exit_code == EXIT_USAGE and "choose a folder you can write to" in caught.value.one_line()
        assert not out.exists()


@pytest.mark.container
@pytest.mark.parametrize(
    ("signature", "message"),
    [
        ("x_ptr *fp32, y_ptr:*fp32", "malformed signature entry"),
        ("x_ptr:*fp32, y_ptr:*fp32, a:fp32", "argument 'n' has no type"),
        ("x_ptr:*fp32, y_ptr:*fp32, a:fp32, n:i32, m:i32", "no argument"),
    ],
)
def test_malformed_signature(env, signature, message):
    with pytest.raises(XpukitError, match=message):
        run_compile(f"{EXAMPLES}:scale_kernel", ["pvc"], env / "o", signature, [])


@pytest.mark.container
def test_bad_kernel_specs(env):
    with pytest.raises(XpukitError, match="malformed kernel"):
        run_compile("kernels.py", ["pvc"], env / "o", None, [])
    with pytest.raises(XpukitError, match="not found"):
        run_compile("nope.py:k", ["pvc"], env / "o", None, [])
    with pytest.raises(XpukitError, match="no function 'nope'"):
        run_compile(f"{EXAMPLES}:nope", ["pvc"], env / "o", None, [])
    with pytest.raises(XpukitError, match=r"not a @triton\.jit"):
        run_compile(f"{EXAMPLES}:XPUKIT_KERNELS", ["pvc"], env / "o", None, [])


BROKEN = """
import triton
import triton.language as tl

@triton.jit
def broken_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) @ 3)  # not a valid Triton operation
"""


@pytest.mark.container
def test_kernel_that_fails_to_compile(env):
    (env / "broken.py").write_text(BROKEN)
    with pytest.raises(KernelCompileError, match="broken_kernel failed to compile for pvc") as info:
        run_compile(f"{env / 'broken.py'}:broken_kernel", ["pvc"], env / "o", "x_ptr:*fp32", ["BLOCK=64"])
    line = info.value.one_line()
    assert "\n" not in line and len(line) <= 200
    # Triton's own reason is in the line, and its whole message stays chained for --debug.
    cause = info.value.__cause__
    assert cause is not None
    while cause.__cause__ is not None:
        cause = cause.__cause__
    assert type(cause).__name__ in line


@pytest.mark.container
def test_ocloc_failure_carries_log_and_repro(env, monkeypatch):
    """A stand-in ocloc that knows pvc but fails every build; its log and the repro line surface."""
    fake = env / "bin" / "ocloc"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "query" ]; then echo "26.27.1 " > OCL_DRIVER_VERSION; exit 0; fi\n'
        'if [ "$2" = "--help" ]; then\n'
        '  echo "  <device_type> can be: pvc, acm-g10 or hexadecimal"; exit 0\n'
        "fi\n"
        'echo "error: IGC says no"; exit 2\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("XPUKIT_OCLOC", str(fake))
    with pytest.raises(OclocError) as info:
        run_compile(f"{EXAMPLES}:scale_kernel", ["pvc"], env / "o", None, [])
    err = info.value
    assert "IGC says no" in err.log and "IGC says no" in str(err)
    assert err.repro.startswith("cd ") and str(fake) in err.repro and "-device pvc" in err.repro
    assert err.repro in err.one_line()
    shutil.rmtree(err.repro.split()[1], ignore_errors=True)


@pytest.mark.container
def test_target_all_builds_every_preset_the_ocloc_supports(env, capsys):
    """`--target all`: exactly the GPU presets the installed ocloc lists, each with a zebin."""
    from xpukit.runtime.offline.ocloc import find_ocloc
    from xpukit.targets import PRESETS

    tool = find_ocloc()
    expected = [n for n, p in PRESETS.items() if p.ocloc_device and tool.supports(p.ocloc_device)]
    # ocloc 26.27 builds all eleven
    assert expected == ["pvc", "bmg", "acm-g10", "arl-h", "mtl", "lnl", "ptl", "wcl", "nvl-s", "nvl-p", "cri"]
    out = env / "all"
    assert run_compile(f"{EXAMPLES}:scale_kernel", ["all"], out, None, []) == 0
    assert sorted(d.name for d in out.iterdir()) == sorted(expected)
    for name in expected:
        assert (out / name / "scale_kernel.zebin").read_bytes()[:4] == b"\x7fELF"
