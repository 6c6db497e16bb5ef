"""`invoke doctor`'s onboarding checks (issue 30), each with its one-line fix: what stops people in
upstream's issues. Hosts are fake trees (tests/support/fakehost.py: sysfs, /dev, /etc, /usr/lib)
and images are fake probe reports shaped as the probe writes them; the probe's own readers run
on fake trees too. An Intel GPU host, its driver packages and an xpu image cannot exist here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.host.test_doctor import FakeRunner, run, xpu_report
from tests.support.doctor import BUILDKIT_OK, ENGINE_OK, TB, lines_for
from tests.support.fakehost import Node, make_host
from xpukit.host.doctor import checkup as doctor
from xpukit.runtime.image import doctor_probe, fingerprint

pytestmark = pytest.mark.unit


def one(lines: list[str], check: str) -> str:
    (line,) = lines_for(lines, check)
    return line


def fix_of(line: str) -> str:
    assert "-> fix: " in line, line
    return line.split("-> fix: ", 1)[1]


# ---- headers --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "what", "fix"), [("ze_api", "ze_api.h", "libze-dev"), ("sycl", "sycl/sycl.hpp", "setvars.sh")]
)
def test_missing_headers_fail_with_the_package_to_install(tmp_path, key, what, fix):
    report = xpu_report()
    report["headers"][key] = ""
    code, lines = run(make_host(tmp_path, [Node()]), "img", runner=FakeRunner(report))
    bad = [ln for ln in lines_for(lines, "headers") if ln.startswith("FAIL")]
    assert len(bad) == 1 and what in bad[0] and fix in fix_of(bad[0])
    assert code == 1


def test_headers_are_found_where_distributions_and_oneapi_put_them(tmp_path):
    (tmp_path / "ze/level_zero").mkdir(parents=True)
    (tmp_path / "ze/level_zero/ze_api.h").write_text("")
    (tmp_path / "oneapi/compiler/2026.1/include/sycl").mkdir(parents=True)
    (tmp_path / "oneapi/compiler/2026.1/include/sycl/sycl.hpp").write_text("")
    found = doctor_probe.probe_headers(str(tmp_path / "oneapi"), extra_ze=(str(tmp_path / "ze/level_zero"),))
    assert found == {
        "ze_api": str(tmp_path / "ze/level_zero/ze_api.h"),
        "sycl": str(tmp_path / "oneapi/compiler/2026.1/include/sycl/sycl.hpp"),
    }
    assert doctor_probe.probe_headers(str(tmp_path / "none"))["sycl"] == ""


def test_the_cpu_image_needs_no_headers(tmp_path):
    report = xpu_report()
    report["manifest"]["data"]["profile"] = "cpu"
    report["headers"] = {"ze_api": "", "sycl": ""}
    _, lines = run(make_host(tmp_path, []), "img", runner=FakeRunner(report))
    assert one(lines, "headers").startswith("SKIP")


# ---- a generic triton wheel shadowing the XPU one -------------------------------------------------


def test_a_generic_triton_wheel_shadowing_the_xpu_one_fails(tmp_path):
    report = xpu_report()
    report["triton_dists"] = {
        "distributions": {"triton": "3.5.1", "triton-xpu": "3.5.0"},
        "location": "/venv/lib/python3.12/site-packages/triton",
        "intel_backend": False,
    }
    code, lines = run(make_host(tmp_path, [Node()]), "img", runner=FakeRunner(report))
    line = one(lines, "triton-wheel")
    assert line.startswith("FAIL") and "no Intel backend" in line and "triton 3.5.1, triton-xpu 3.5.0" in line
    assert fix_of(line).startswith("pip uninstall -y triton")
    assert code == 1


def test_the_xpu_triton_alone_is_ok(tmp_path):
    _, lines = run(make_host(tmp_path, [Node()]), "img", runner=FakeRunner(xpu_report()))
    assert one(lines, "triton-wheel").startswith("OK")


# ---- ocloc / IGC ----------------------------------------------------------------------------------


def test_an_ocloc_not_matching_the_runtime_fails(tmp_path):
    report = xpu_report()
    report["gpu_stack"]["packages"]["intel-ocloc"]["version"] = "25.40.35563.4-1"
    code, lines = run(make_host(tmp_path, [Node()]), "img", runner=FakeRunner(report))
    line = one(lines, "ocloc-igc")
    assert line.startswith("FAIL") and "does not match the compute runtime (libze-intel-gpu1 25.18.33578.6-1)" in line
    assert "intel-ocloc=25.18.33578.6-1 && apt-mark hold intel-ocloc libigc2" in fix_of(line)
    assert code == 1


def test_a_matched_held_pair_is_ok(tmp_path):
    _, lines = run(make_host(tmp_path, [Node()]), "img", runner=FakeRunner(xpu_report()))
    assert one(lines, "ocloc-igc").startswith("OK") and "IGC 2.11.7-1" in one(lines, "ocloc-igc")


# ---- the render node's group inside the container --------------------------------------------------


def test_a_render_node_the_container_cannot_open_names_the_gid(tmp_path):
    report = xpu_report()
    report["render_nodes"] = [{"path": "/dev/dri/renderD128", "gid": 993, "open": False}]
    code, lines = run(make_host(tmp_path, [Node()]), "img", runner=FakeRunner(report))
    line = one(lines, "render-gid")
    assert line.startswith("FAIL") and "group 993" in line and fix_of(line).startswith("docker run --group-add 993")
    assert code == 1


def test_no_render_node_in_the_container_on_a_gpu_host_fails(tmp_path):
    report = xpu_report()
    report["render_nodes"] = []
    _, lines = run(make_host(tmp_path, [Node()]), "img", runner=FakeRunner(report))
    assert one(lines, "render-gid").startswith("FAIL") and "--device /dev/dri" in one(lines, "render-gid")


def test_the_probe_reads_render_nodes_and_their_groups(tmp_path):
    host = make_host(tmp_path, [Node()])
    (node,) = doctor_probe.probe_render_nodes(host.dev_root)
    assert node["path"].endswith("dev/dri/renderD128") and node["gid"] == host.node_gid() and node["open"] is True


# ---- the Level Zero loader on RHEL and SUSE paths --------------------------------------------------


@pytest.mark.parametrize(
    ("os_release", "fix"),
    [
        ('ID="rhel"\nID_LIKE="fedora"\n', "sudo dnf install level-zero"),
        ('ID="sles"\nID_LIKE="suse"\n', "sudo zypper install level-zero"),
        ("ID=ubuntu\nID_LIKE=debian\n", "sudo apt-get install libze1"),
    ],
)
def test_a_missing_loader_gets_the_distributions_fix(tmp_path, os_release, fix):
    host = make_host(tmp_path, [Node()])
    (Path(host.host_root) / "etc").mkdir(parents=True, exist_ok=True)
    (Path(host.host_root) / "etc/os-release").write_text(os_release)
    _, lines = run(host)
    line = one(lines, "ze-loader")
    assert line.startswith("WARN") and fix_of(line).startswith(fix)


@pytest.mark.parametrize("lib_dir", ["usr/lib64", "usr/lib/x86_64-linux-gnu"])
def test_the_loader_is_found_in_lib64_as_in_the_multiarch_folder(tmp_path, lib_dir):
    host = make_host(tmp_path, [Node()])
    (Path(host.host_root) / lib_dir).mkdir(parents=True, exist_ok=True)
    (Path(host.host_root) / lib_dir / "libze_loader.so.1").write_text("")
    _, lines = run(host)
    assert one(lines, "ze-loader").startswith("OK") and f"/{lib_dir}" in one(lines, "ze-loader")


def test_no_gpu_no_loader_needed(tmp_path):
    _, lines = run(make_host(tmp_path, []))
    assert one(lines, "ze-loader").startswith("SKIP")


# ---- WSL2 -----------------------------------------------------------------------------------------


def test_wsl_dxg_without_its_libraries_fails_with_the_update_fix(tmp_path):
    code, lines = run(make_host(tmp_path, [], wsl=True, wsl_libs=False))
    line = one(lines, "wsl-libs")
    assert line.startswith("FAIL") and "/dev/dxg present" in line and "wsl --update" in fix_of(line)
    assert one(lines, "gpu").startswith("SKIP") and code == 1


# ---- the driver line: LTS or rolling -----------------------------------------------------------------


def _sources(host, name: str, text: str) -> None:
    path = Path(host.host_root) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        (
            "etc/apt/sources.list.d/intel-gpu-noble.list",
            "deb [arch=amd64 signed-by=/usr/share/keyrings/intel-graphics.gpg] "
            "https://repositories.intel.com/gpu/ubuntu noble/lts/2523 unified\n",
            "lts/2523",
        ),
        (
            "etc/apt/sources.list.d/intel-gpu.list",
            "deb [arch=amd64] https://repositories.intel.com/gpu/ubuntu noble unified\n",
            "rolling",
        ),
        (
            "etc/yum.repos.d/intel-gpu-9.2.repo",
            "[intel-gpu]\nbaseurl=https://repositories.intel.com/gpu/rhel/9.2/lts/2523/unified/\n",
            "lts/2523",
        ),
        (
            "etc/apt/sources.list.d/other.list",
            "# deb https://repositories.intel.com/gpu/ubuntu noble/lts/2350 unified\n",
            "",
        ),
    ],
)
def test_the_driver_line_is_read_from_the_package_sources(tmp_path, name, text, expected):
    host = make_host(tmp_path, [Node()])
    _sources(host, name, text)
    assert doctor_probe.driver_line(host.host_root) == expected
    _, lines = run(host)
    line = one(lines, "driver-line")
    if expected.startswith("lts/"):
        assert line.startswith("OK") and "LTS 2523" in line and "#7670" in line
    elif expected == "rolling":
        assert line.startswith("OK") and "rolling" in line
    else:
        assert line.startswith("SKIP")


# ---- an image from before these probes --------------------------------------------------------------


def test_an_older_image_is_not_failed_on_what_its_probe_never_looked_at(tmp_path):
    report = xpu_report()
    for key in ("headers", "triton_dists", "render_nodes", "gpu_stack", "kernel"):
        report.pop(key)
    code, lines = run(make_host(tmp_path, [Node()]), "img", runner=FakeRunner(report))
    assert one(lines, "onboarding").startswith("SKIP") and "rebuild" in one(lines, "onboarding")
    assert code == 0, lines


# ---- --report ---------------------------------------------------------------------------------------


def report_lines(host, runner=None, image="img") -> list[str]:
    lines: list[str] = []
    options = doctor.DoctorOptions(
        image=image,
        sysfs_root=host.sysfs_root,
        dev_root=host.dev_root,
        host_root=host.host_root,
        engine_probe=ENGINE_OK,
        buildkit_probe=BUILDKIT_OK,
        runner=runner,
        free_bytes=TB,
        report=True,
    )
    assert doctor.run_doctor(options, out=lines.append) == 0
    return lines


def test_report_has_every_field_upstream_asks_for(tmp_path):
    host = make_host(tmp_path, [Node()])
    _sources(
        host,
        "etc/apt/sources.list.d/intel-gpu.list",
        "deb https://repositories.intel.com/gpu/ubuntu noble/lts/2523 unified\n",
    )
    lines = report_lines(host, FakeRunner(xpu_report()))
    fields = dict(line.split(":", 1) for line in lines)
    assert list(fields) == list(fingerprint.FIELDS)
    values = {k: v.strip() for k, v in fields.items()}
    assert values["GPU"] == "Data Center GPU Max 1550 (8086:0bd5)"
    assert values["driver"].startswith("host: kernel driver i915; image: UR reports 1.6.32224, libze-intel-gpu1 25.18")
    assert values["driver line"] == "LTS 2523"
    assert values["IGC"] == "libigc2 2.11.7-1" and values["Level Zero"] == "loader 1.21.9"
    assert values["DLE/OMIX"] == "DLE 2025.2.2" and values["compiler"] == "oneAPI 2025.2"
    assert values["Triton"] == "3.5.0+git9e237132" and values["PyTorch"] == "not installed"
    assert values["UR"] == "2025.2 (setarg+launch(9))" and values["kernel"]


def test_report_without_an_image_says_what_is_unknown(tmp_path):
    lines = report_lines(make_host(tmp_path, []), runner=None, image=None)
    values = {k: v.strip() for k, v in (line.split(":", 1) for line in lines)}
    assert values["GPU"] == "no Intel GPU render node" and values["Triton"] == "unknown"


def test_report_is_safe_to_paste(tmp_path, monkeypatch):
    """A user name, a host name, a home folder and tokens planted in what the probe returns never
    reach the report."""
    monkeypatch.setenv("USER", "alice-secretname")
    monkeypatch.setenv("HOME", "/home/alice-secretname")
    monkeypatch.setenv("HOSTNAME", "build-box-17.corp.example")
    monkeypatch.setenv("GITHUB_TOKEN", "not-a-github-shaped-secret-value")
    report = xpu_report()
    report["installed"]["triton"] = "3.5.0+git9e237132 built by alice-secretname on build-box-17.corp.example"
    report["installed"]["torch"] = "2.14.0 /home/alice-secretname/src ghp_" + "A" * 36
    report["oneapi"]["version"] = "2026.1 not-a-github-shaped-secret-value glpat-" + "b" * 20
    text = "\n".join(report_lines(make_host(tmp_path, [Node()]), FakeRunner(report)))
    for private in ("alice-secretname", "build-box-17", "ghp_", "glpat-", "not-a-github-shaped-secret-value"):
        assert private not in text, text
    assert "<redacted>" in text and "<token>" in text and "3.5.0+git9e237132" in text


def test_report_scrubs_this_machines_own_names():
    private = fingerprint.private_words({"USER": "bob", "HOME": "/home/bob"})
    assert "/home/bob" in private and "bob" in private
    assert fingerprint.scrub("x /home/bob y bob z bobby", private) == "x <redacted> y <redacted> z bobby"
    assert json.dumps(fingerprint.render({}, [])).count("unknown") == len(fingerprint.FIELDS)
