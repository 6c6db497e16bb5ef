"""Today's xpu base (issue 30): DLE 2026.1.x, the OMIX choice (--base omix), the ocloc/IGC pair
held together, and the manifest's check of that stack. No Intel GPU repository or OMIX repository
is reachable here: the scripts run as --dry-run, dpkg's answers come from a fake ``dpkg-query``
(a stand-in for an Ubuntu image with Intel's runtime, which cannot exist on this Debian host), and
the manifest rules run on manifests written as such an image would."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.invoke import invoke
from xpukit import layout
from xpukit.errors import XpukitError
from xpukit.host.image import build
from xpukit.host.versions import pins
from xpukit.runtime.image import manifest

pytestmark = pytest.mark.unit
SCRIPTS = layout.REPO_ROOT / "scripts"
RUNTIME = "25.35.35096.9-1~24.04"  # a compute-runtime version as Intel's repository writes them (test data)
IGC = "2.18.5-1~24.04"


def run(script: str, *args: str, path_dir: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, **env}
    if path_dir is not None:
        full["PATH"] = f"{path_dir}:{full['PATH']}"
    return subprocess.run(["bash", str(SCRIPTS / script), *args], env=full, capture_output=True, text=True, check=False)


def fake_dpkg(tmp_path: Path, versions: dict[str, str]) -> Path:
    """A ``dpkg-query -W -f='${Version}' NAME`` answering from ``versions`` (exit 1 for others)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    cases = "\n".join(f'    {name}) echo -n "{version}"; exit 0 ;;' for name, version in versions.items())
    script = bindir / "dpkg-query"
    script.write_text(f'#!/bin/bash\nfor last; do :; done\ncase "$last" in\n{cases}\n    *) exit 1 ;;\nesac\n')
    script.chmod(0o755)
    return bindir


# ---- the pins ------------------------------------------------------------------------------------


def test_the_xpu_base_is_dle_2026_1_with_the_new_tag_scheme():
    base = pins.load().profile("xpu").base
    assert base.image == "intel/deep-learning-essentials"
    assert base.tag == "2026.1.2-devel-ubuntu24.04" and "-0-" not in base.tag
    assert base.digest == "" and base.reference == base.name  # unknown here: never invented


def test_base_omix_builds_from_ubuntu_with_intel_omix_dev():
    profile = build.with_base(pins.load().profile("xpu"), "omix")
    assert profile.base_name == "ubuntu:24.04"
    args = build.build_args(profile, profile.base_reference, build.Variant(base="omix"))
    assert args["OMIX_PACKAGE"] == "intel-omix-dev" and args["BASE_IMAGE"] == "ubuntu:24.04"
    plain = build.build_args(pins.load().profile("xpu"), "x", build.Variant())
    assert plain["OMIX_PACKAGE"] == "" and plain["OCLOC_IGC_PACKAGE"] == "libigc2"


def test_base_omix_is_refused_for_the_cpu_profile_and_unknown_choices():
    with pytest.raises(XpukitError, match=r"\[cpu.omix\]"):
        build.with_base(pins.load().profile("cpu"), "omix")
    with pytest.raises(XpukitError, match="unknown --base 'dle'"):
        build.with_base(pins.load().profile("xpu"), "dle")


def test_base_omix_dry_run_says_the_repository_is_unknown():
    result = invoke("build", "--profile", "xpu", "--base", "omix", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "xpu.omix.apt_repo is empty: the build stops at install-omix.sh" in result.stderr
    assert "--build-arg BASE_IMAGE=ubuntu:24.04" in result.stdout and "OMIX_PACKAGE=intel-omix-dev" in result.stdout


# ---- install-omix.sh -----------------------------------------------------------------------------


def test_omix_is_skipped_without_a_package():
    p = run("install-omix.sh", "--dry-run", OMIX_PACKAGE="")
    assert p.returncode == 0 and "not an OMIX build" in p.stdout and "apt-get" not in p.stdout


def test_omix_without_a_repository_is_refused_in_one_line():
    p = run("install-omix.sh", "--dry-run", OMIX_PACKAGE="intel-omix-dev", OMIX_APT_REPO="")
    assert p.returncode == 2 and "apt repository carrying intel-omix-dev is not pinned" in p.stderr
    assert "xpu.omix.apt_repo" in p.stderr


def test_omix_plan_installs_holds_and_checks_the_layout():
    repo = "deb [signed-by=/usr/share/keyrings/intel-omix.gpg] https://apt.example.invalid/omix noble main"
    p = run(
        "install-omix.sh",
        "--dry-run",
        OMIX_PACKAGE="intel-omix-dev",
        OMIX_VERSION="0.4.0-1",
        OMIX_APT_REPO=repo,
        OMIX_APT_KEY="https://apt.example.invalid/key.asc",
    )
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert any(ln.endswith("| gpg --dearmor --yes -o /usr/share/keyrings/intel-omix.gpg") for ln in lines)
    assert any("/etc/apt/sources.list.d/intel-omix.list" in ln and "apt.example.invalid/omix" in ln for ln in lines)
    install = next(ln for ln in lines if ln.endswith("intel-omix-dev=0.4.0-1"))
    assert lines.index(install) < lines.index("apt-mark hold intel-omix-dev")


# ---- install-ocloc.sh: the ocloc/IGC pair --------------------------------------------------------


def test_ocloc_matches_the_runtime_and_keeps_and_holds_the_images_igc(tmp_path):
    bindir = fake_dpkg(tmp_path, {"libze-intel-gpu1": RUNTIME, "libigc2": IGC})
    p = run("install-ocloc.sh", "--dry-run", path_dir=bindir, OCLOC_SOURCE="intel-gpu-repo",
            OCLOC_PACKAGE="intel-ocloc", OCLOC_IGC_PACKAGE="libigc2")  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert f"ocloc: matching libze-intel-gpu1 {RUNTIME}" in p.stdout
    assert f"ocloc: keeping libigc2 {IGC} (the base image's)" in p.stdout
    lines = p.stdout.splitlines()
    assert shlex.split(lines[-2])[-2:] == [f"intel-ocloc={RUNTIME}", f"libigc2={IGC}"]
    assert lines[-1] == "apt-mark hold intel-ocloc libigc2"


def test_ocloc_without_igc_in_the_image_says_so(tmp_path):
    bindir = fake_dpkg(tmp_path, {"intel-opencl-icd": RUNTIME})
    p = run("install-ocloc.sh", "--dry-run", path_dir=bindir, OCLOC_SOURCE="intel-gpu-repo",
            OCLOC_PACKAGE="intel-ocloc", OCLOC_IGC_PACKAGE="libigc2")  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "libigc2 is not in the base image" in p.stdout
    assert shlex.split(p.stdout.splitlines()[-2])[-2:] == [f"intel-ocloc={RUNTIME}", "libigc2"]


# ---- the manifest's check of the stack ------------------------------------------------------------

PINS = {"ocloc_source": "intel-gpu-repo", "ocloc_package": "intel-ocloc", "ocloc_igc_package": "libigc2"}


def pkg(version: str, held: bool = True) -> dict[str, object]:
    return {"version": version, "held": held}


def test_a_matched_held_pair_passes():
    packages = {"libze-intel-gpu1": pkg(RUNTIME, False), "intel-ocloc": pkg(RUNTIME), "libigc2": pkg(IGC)}
    assert manifest.gpu_stack_problems(packages, PINS) == []


def test_an_ocloc_not_matching_the_runtime_is_named():
    packages = {"libze-intel-gpu1": pkg(RUNTIME), "intel-ocloc": pkg("25.40.1-1"), "libigc2": pkg(IGC)}
    assert manifest.gpu_stack_problems(packages, PINS) == [
        f"intel-ocloc 25.40.1-1 does not match the compute runtime (libze-intel-gpu1 {RUNTIME})"
    ]


def test_an_unheld_or_missing_half_of_the_pair_is_named():
    problems = manifest.gpu_stack_problems({"intel-ocloc": pkg(RUNTIME, held=False)}, PINS)
    assert problems == [
        "intel-ocloc is not held (apt-mark hold): an apt upgrade could split the ocloc/IGC pair",
        "libigc2 is not installed",
    ]


def test_omix_must_be_installed_held_and_at_its_pin():
    pins_omix = {"omix_package": "intel-omix-dev", "omix": "0.4.0-1"}
    assert manifest.gpu_stack_problems({}, pins_omix) == ["intel-omix-dev is not installed"]
    assert manifest.gpu_stack_problems({"intel-omix-dev": pkg("0.5.0-1", held=False)}, pins_omix) == [
        "intel-omix-dev pinned 0.4.0-1, installed 0.5.0-1",
        "intel-omix-dev is not held (apt-mark hold)",
    ]


def test_mismatches_include_the_stack_and_the_cpu_image_is_left_alone():
    bad = {
        "pins": PINS,
        "gpu_packages": {"libze-intel-gpu1": pkg(RUNTIME), "intel-ocloc": pkg("1-1"), "libigc2": pkg(IGC)},
    }
    assert any("does not match the compute runtime" in p for p in manifest.mismatches(bad))
    cpu = {"pins": {"ocloc_source": "apt", "ocloc_package": "intel-opencl-icd"}, "gpu_packages": {}}
    assert manifest.gpu_stack_problems(cpu["gpu_packages"], cpu["pins"]) == []


def test_gpu_packages_reads_holds_from_dpkg_without_writing_apt_caches(tmp_path):
    """Real dpkg on this Debian host: a held package is read from dpkg's selection (Status "hold ...")
    and nothing runs `apt-mark showhold`, which writes /var/cache/apt/*.bin into an image layer and made
    two podman builds of one commit differ (tests/engine/test_verify.py)."""
    if not shutil.which("dpkg-query"):
        pytest.skip("no dpkg-query on this host")
    found = manifest.gpu_packages(("dpkg", "xpukit-no-such-package"))
    assert set(found) == {"dpkg"}
    selection = subprocess.run(["dpkg-query", "-W", "-f=${Status}", "dpkg"], capture_output=True, text=True).stdout
    assert found["dpkg"]["held"] == (selection.split()[0] == "hold")
    assert found["dpkg"]["version"]
    source = Path(manifest.__file__).read_text()
    assert '"apt-mark", "showhold"' not in source
