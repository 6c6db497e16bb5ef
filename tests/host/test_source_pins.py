"""Which PyTorch and LLVM a Triton commit is built with (issue 30): the ones that commit pins,
from env/pins.toml where it records them, else read from the commit's checkout at build time;
never another commit's. The plans are the real `invoke build --dry-run` of each variant."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from tests.support.invoke import invoke
from xpukit import layout
from xpukit.errors import XpukitError
from xpukit.host.image import build
from xpukit.host.versions import pins

pytestmark = pytest.mark.unit

# Read from upstream's repository (git show <commit>:.github/pins/pytorch.txt, cmake/llvm-hash.txt,
# cmake/llvm-info.json), the values env/pins.toml must hold.
KNOWN = {
    "zebin": (
        "9e237132e02d6e813836ad6a7137bd275fc0a7cd",
        "a47976948863783de4a5b27dc9f05d8be916d559",
        "f6ded0be897e2878612dd903f7e8bb85448269e5",
    ),
    "blog": (
        "197f5f843fd17deab1de1df1c6f17e60978ecdce",
        "a8e3d1984a78495832d6baca6aa1d95dddc5614a",
        "a66376b0dc3b2ea8a84fda26faca287980986f78",
    ),
    "current": (
        "6c1649935d83fcc8dff48f608f6556cb50d6a6fb",
        "23b1588b32ea2d46410793347d635017fdc49c75",
        "941a04e69ee8fe4c7a162b2f1e215aa8df867534",
    ),
}
ARBITRARY = "0123456789abcdef0123456789abcdef01234567"


def xpu() -> pins.Profile:
    return pins.load().profile("xpu")


def plan_of(triton: str) -> tuple[list[str], dict[str, str]]:
    result = invoke("build", "--profile", "xpu", "--triton", triton, "--torch", "source", "--dry-run")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    command = shlex.split([ln for ln in lines if " build " in ln][-1])
    args = dict(
        command[i + 1].split("=", 1)
        for i, word in enumerate(command)
        if word == "--build-arg" and "=" in command[i + 1]
    )
    return [ln for ln in lines if ln.startswith("pins: ")], args


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_named_variants_plan_their_own_pins(name):
    triton, torch, llvm = KNOWN[name]
    lines, args = plan_of(name)
    assert args["TRITON_COMMIT"] == triton and args["TORCH_COMMIT"] == torch and args["LLVM_COMMIT"] == llvm
    assert lines[0] == f"pins: triton {triton} (--triton {name})"
    assert lines[1].startswith(f"pins: torch {torch} (") and "recorded in env/pins.toml" in lines[1]
    assert (
        lines[2].startswith(f"pins: llvm {llvm} (") and "checked against the checkout's pin at build time" in lines[2]
    )


def test_an_arbitrary_commit_reads_its_pins_at_build_time():
    """The issue's report: this commit got the zebin commit's PyTorch pin without a word."""
    lines, args = plan_of(ARBITRARY)
    assert args["TRITON_COMMIT"] == ARBITRARY
    assert args["TORCH_COMMIT"] == "" and args["LLVM_COMMIT"] == ""
    assert all(torch not in " ".join(args.values()) for _t, torch, _l in KNOWN.values())
    assert lines == [
        f"pins: triton {ARBITRARY} (a commit env/pins.toml does not name)",
        f"pins: torch read from .github/pins/pytorch.txt of Triton {ARBITRARY[:12]} at build time",
        f"pins: llvm read from cmake/llvm-info.json or cmake/llvm-hash.txt of Triton {ARBITRARY[:12]} at build time "
        "(downloaded prebuilt by Triton's setup.py)",
    ]


def test_a_named_commit_given_as_hex_gets_that_commits_pins():
    triton, torch, llvm = KNOWN["blog"]
    assert build.source_pins(xpu(), triton) == build.SourcePins("blog", triton, torch, llvm)


def test_the_default_is_the_profiles_own_commit_and_its_pins():
    profile = xpu()
    got = build.source_pins(profile, "")
    assert got.triton == profile["triton"]["commit"] and got.torch == profile["torch"]["commit"]


def test_without_torch_source_the_plan_says_no_pytorch_is_built():
    result = invoke("build", "--profile", "xpu", "--triton", ARBITRARY, "--torch", "none", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "pins: torch: --torch none, no PyTorch source build" in result.stdout


@pytest.mark.parametrize("bad", ["main", "6c16499", "6C1649935D83FCC8DFF48F608F6556CB50D6A6FB", "current;id"])
def test_a_name_that_is_neither_variant_nor_commit_is_refused(bad):
    with pytest.raises(XpukitError, match="unknown Triton variant"):
        build.source_pins(xpu(), bad)


def test_the_task_refuses_it_in_one_line():
    result: subprocess.CompletedProcess = invoke("build", "--profile", "xpu", "--triton", "main", "--dry-run")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "unknown Triton variant 'main'" in result.stderr and "40-hex commit" in result.stderr


@pytest.mark.parametrize("table", ["torch.variants", "triton.llvm_pins"])
def test_a_pin_for_a_variant_triton_does_not_name_is_refused(table, tmp_path):
    text = layout.REPO_ROOT.joinpath("env/pins.toml").read_text()
    header = f"[xpu.{table}]"
    start = text.index(header)
    line_end = text.index("\n", start) + 1
    edited = text[:line_end] + 'nightly = "0123456789abcdef0123456789abcdef01234567"\n' + text[line_end:]
    path = tmp_path / "pins.toml"
    path.write_text(edited)
    with pytest.raises(pins.PinsError, match=f"xpu.{table}.nightly: names no xpu.triton.variants entry"):
        pins.load(path)
