"""`invoke doctor` against fake hosts (sysfs + /dev in tmp_path) and a fake container runner."""

from __future__ import annotations

import json

import pytest

from tests.support.doctor import BUILDKIT_OK, ENGINE_OK, TB, lines_for
from tests.support.fakehost import Node, make_host
from xpukit.host import engine, gpu
from xpukit.host.doctor import checkup as doctor
from xpukit.host.doctor import host as doctor_host
from xpukit.host.doctor import image as doctor_image
from xpukit.host.doctor.findings import Finding
from xpukit.runtime.image import doctor_probe

pytestmark = pytest.mark.unit


def run(host, image=None, *, user=None, runner=None, engine=ENGINE_OK, free=TB, expected_pins=None):
    lines: list[str] = []
    options = doctor.DoctorOptions(
        image=image,
        eng=None,
        sysfs_root=host.sysfs_root,
        dev_root=host.dev_root,
        host_root=host.host_root,
        user=user or gpu.UserIds(0, frozenset({0})),
        engine_probe=engine,
        buildkit_probe=BUILDKIT_OK,
        runner=runner,
        disk_path="/var/lib/docker",
        free_bytes=free,
        expected_pins=expected_pins,
    )
    code = doctor.run_doctor(options, out=lines.append)
    return code, lines


# ---- host ---------------------------------------------------------------------------------------


def test_pvc_host_all_ok(tmp_path):
    code, lines = run(make_host(tmp_path, [Node()]))
    assert code == 0, lines
    assert lines_for(lines, "engine")[0].startswith("OK")
    assert lines_for(lines, "buildkit")[0].startswith("OK")
    (g,) = lines_for(lines, "gpu")
    assert "renderD128: Data Center GPU Max 1550 (8086:0bd5) at 0000:3a:00.0" in g
    assert "kernel driver i915" in lines_for(lines, "driver")[0]
    assert lines_for(lines, "access")[0].startswith("OK")
    assert lines_for(lines, "disk")[0].startswith("OK")
    assert lines[-1].startswith("doctor: 0 failed")


def test_every_line_has_a_status_first(tmp_path):
    _, lines = run(make_host(tmp_path, [Node()]))
    for line in lines[:-1]:
        assert line.split()[0] in ("OK", "WARN", "FAIL", "SKIP"), line


def test_host_without_gpu_warns_and_passes(tmp_path):
    code, lines = run(make_host(tmp_path, []))
    assert code == 0
    (g,) = lines_for(lines, "gpu")
    assert g.startswith("WARN") and "no Intel GPU render node" in g and "fix:" in g
    assert not lines_for(lines, "driver") and not lines_for(lines, "access")


def test_user_outside_render_group(tmp_path):
    host = make_host(tmp_path, [Node(mode=0o660)])
    gid = host.node_gid()
    outsider = gpu.UserIds(54321, frozenset({54321}))
    code, lines = run(host, user=outsider)
    (a,) = lines_for(lines, "access")
    if gid:
        # The group may read and write: containers get in through --group-add; the host user does not.
        assert a.startswith("WARN") and f"--group-add {gid}" in a and "usermod -aG" in a
        assert code == 0
    else:
        # Running as root: the node's group is 0, which the kit never adds; nobody else can open it.
        assert a.startswith("FAIL") and "udev rule" in a
        assert code == 1


def test_user_outside_render_group_with_nonzero_gid(tmp_path, monkeypatch):
    host = make_host(tmp_path, [Node(mode=0o660)])
    real = gpu.render_nodes
    monkeypatch.setattr(
        gpu,
        "render_nodes",
        lambda *a: [n.__class__(**{**n.__dict__, "gid": 4242, "uid": 0}) for n in real(*a)],
    )
    code, lines = run(host, user=gpu.UserIds(54321, frozenset({54321})))
    (a,) = lines_for(lines, "access")
    assert a.startswith("WARN") and "--group-add 4242" in a and "usermod -aG" in a
    assert code == 0
    # In the group: fine.
    code, lines = run(host, user=gpu.UserIds(54321, frozenset({54321, 4242})))
    assert lines_for(lines, "access")[0].startswith("OK")


def test_node_nobody_but_root_can_open_fails(tmp_path):
    host = make_host(tmp_path, [Node(mode=0o600)])
    code, lines = run(host, user=gpu.UserIds(54321, frozenset({54321})))
    (a,) = lines_for(lines, "access")
    assert a.startswith("FAIL") and "mode 0600" in a and 'MODE="0660"' in a
    assert code == 1


def test_no_driver_bound_fails(tmp_path):
    code, lines = run(make_host(tmp_path, [Node(driver="")]))
    (d,) = lines_for(lines, "driver")
    assert d.startswith("FAIL") and "modprobe" in d
    assert code == 1


def test_xe_driver_is_ok(tmp_path):
    _, lines = run(make_host(tmp_path, [Node(device="0xe20b", driver="xe")]))
    assert lines_for(lines, "driver")[0].startswith("OK") and "xe" in lines_for(lines, "driver")[0]


def test_wsl_host(tmp_path):
    code, lines = run(make_host(tmp_path, [], wsl=True))
    assert code == 0
    assert lines_for(lines, "wsl")[0].startswith("OK")
    assert lines_for(lines, "wsl-libs")[0].startswith("OK")
    assert lines_for(lines, "gpu")[0].startswith("SKIP")


def test_wsl_host_without_libs_fails(tmp_path):
    code, lines = run(make_host(tmp_path, [], wsl=True, wsl_libs=False))
    assert lines_for(lines, "wsl-libs")[0].startswith("FAIL") and code == 1


def test_engine_down_fails_and_skips_the_image(tmp_path):
    code, lines = run(make_host(tmp_path, [Node()]), "xpukit:xpu", engine=lambda: (False, "connection refused"))
    assert code == 1
    assert lines_for(lines, "engine")[0].startswith("FAIL") and "DOCKER_HOST" in lines_for(lines, "engine")[0]
    assert lines_for(lines, "image")[0].startswith("SKIP")


def test_low_disk_warns(tmp_path):
    _, lines = run(make_host(tmp_path, []), free=10 * doctor_host.GIB)
    (d,) = lines_for(lines, "disk")
    assert d.startswith("WARN") and "10 GiB free at /var/lib/docker" in d


def test_disk_budget_is_stated_once_per_profile():
    assert doctor_host.disk_budget_gib("xpu") == doctor_host.SOURCE_BUILD_FREE_GIB
    assert doctor_host.disk_budget_gib("cpu") == doctor_host.IMAGE_ONLY_FREE_GIB < doctor_host.SOURCE_BUILD_FREE_GIB
    low = doctor_host.check_disk(
        "/", (doctor_host.IMAGE_ONLY_FREE_GIB - 1) * doctor_host.GIB, doctor_host.disk_budget_gib("cpu")
    )
    assert low.status == "warn" and f"~{doctor_host.IMAGE_ONLY_FREE_GIB} GiB wanted" in low.found


def test_layer_decompression_check_names_pigz_only_where_it_helps():
    """unpigz found or not (an injected PATH lookup), podman, and a remote engine."""
    missing = doctor_host.check_layer_decompression("docker", "", which=lambda name: None)
    assert missing.status == "warn" and "unpigz not found" in missing.found and "apt-get install pigz" in missing.fix
    found = doctor_host.check_layer_decompression(
        "docker", "unix:///run/docker.sock", which=lambda name: f"/usr/bin/{name}"
    )
    assert found.status == "ok"
    assert doctor_host.check_layer_decompression("podman", "", which=lambda name: None).status == "skip"
    remote = doctor_host.check_layer_decompression("docker", "ssh://build-host", which=lambda name: None)
    assert remote.status == "skip" and "ssh://build-host" in remote.found


def test_doctor_prints_one_pull_line(tmp_path):
    _, lines = run(make_host(tmp_path, [Node()]))
    assert len(lines_for(lines, "pull")) == 1, lines


def test_host_run_check_names_what_is_missing(monkeypatch):
    """What `invoke compile --where host` needs, on a host with none of it (an ocloc path that is not there)."""
    monkeypatch.setenv("XPUKIT_OCLOC", "/nonexistent/xpukit/ocloc")
    none = doctor_host.check_host_run(find_module=lambda name: None)
    assert none.status == "skip" and "triton (python), numpy (python), ocloc" in none.found
    no_ocloc = doctor_host.check_host_run(find_module=lambda name: object())
    assert no_ocloc.status == "warn" and no_ocloc.found.startswith("--where host lacks ocloc")
    assert "XPUKIT_OCLOC" in no_ocloc.line()


def test_no_image_is_a_skip_line(tmp_path):
    _, lines = run(make_host(tmp_path, []))
    assert lines_for(lines, "image")[0].startswith("SKIP")


def test_finding_line_format():
    assert Finding("fail", "ocloc", "not found", "install it").line() == (
        "FAIL  ocloc        not found  -> fix: install it"
    )
    assert Finding("ok", "ocloc", "fine", "ignored").line() == "OK    ocloc        fine"
    with pytest.raises(ValueError):
        Finding("bad", "x", "y")


# ---- in the container ---------------------------------------------------------------------------


def xpu_report(**over):
    report = {
        "probe_version": 1,
        "oneapi": {"root": "/opt/intel/oneapi", "releases": ["2025.2"], "version": "2025.2", "setvars": True},
        "level_zero": {
            "path": "/usr/lib/x86_64-linux-gnu/libze_loader.so.1",
            "version": "1.21.9",
            "error": "",
        },
        "ur": {
            "status": "ok",
            "error": "",
            "loader": "/opt/intel/oneapi/compiler/2025.2/lib/libur_loader.so",
            "release": "2025.2",
            "launch_form": "setarg+launch(9)",
            "adapters": ["level_zero", "opencl"],
            "gpu": {
                "name": "Intel(R) Data Center GPU Max 1550",
                "type": "gpu",
                "backend": "level_zero",
                "driver_version": "1.6.32224",
                "platform": "Intel(R) oneAPI Unified Runtime over Level-Zero",
            },
            "cpu": {"error": "no CPU device"},
        },
        "ocloc": {
            "path": "/usr/bin/ocloc",
            "version": "25.18.33578",
            "targets": ["acm-g10", "arl-h", "bmg", "dg2", "lnl", "lnl-m", "mtl-h", "ptl-h", "pvc"],
        },
        "installed": {"python": "3.12.3", "triton": "3.5.0+git9e237132", "torch": "", "numpy": "2.4.6"},
        "manifest": {
            "data": {
                "profile": "xpu",
                "python": "3.12.3",
                "triton": "3.5.0+git9e237132",
                "torch": "",
                "numpy": "2.4.6",
                "ocloc": {"version": "25.18.33578", "package_version": "25.18.33578.6-1"},
                "pins": {
                    "python": "",
                    "ocloc": "",
                    "triton_source": "git",
                    "triton": "",
                    "triton_commit": "9e237132e02d6e813836ad6a7137bd275fc0a7cd",
                    "torch_source": "none",
                    "torch_commit": "",
                    "fingerprint": "abc",
                    "ocloc_source": "intel-gpu-repo",
                    "ocloc_package": "intel-ocloc",
                    "ocloc_igc_package": "libigc2",
                },
            },
            "error": "",
        },
        "headers": {
            "ze_api": "/usr/include/level_zero/ze_api.h",
            "sycl": "/opt/intel/oneapi/compiler/2025.2/include/sycl/sycl.hpp",
        },
        "triton_dists": {
            "distributions": {"triton": "3.5.0+git9e237132"},
            "location": "/opt/xpukit/venv/lib/python3.12/site-packages/triton",
            "intel_backend": True,
        },
        "render_nodes": [{"path": "/dev/dri/renderD128", "gid": 109, "open": True}],
        "gpu_stack": {
            "packages": {
                "libze-intel-gpu1": {"version": "25.18.33578.6-1", "held": False},
                "intel-ocloc": {"version": "25.18.33578.6-1", "held": True},
                "libigc2": {"version": "2.11.7-1", "held": True},
            },
            "dle": "2025.2.2",
            "driver_line": "",
        },
        "kernel": "6.8.0-60-generic",
    }
    for key, value in over.items():
        report[key] = value
    return report


class FakeRunner:
    def __init__(self, report=None, stdout=None, code=0, raises=None):
        self.stdout = stdout if stdout is not None else "banner from a native lib\n" + json.dumps(report)
        self.code, self.raises, self.calls = code, raises, []

    def __call__(self, image, command, options):
        self.calls.append((image, command, options))
        if self.raises:
            raise self.raises
        return self.code, self.stdout


def test_xpu_image_on_pvc_host_all_ok(tmp_path):
    host = make_host(tmp_path, [Node()])
    runner = FakeRunner(xpu_report())
    code, lines = run(host, "xpukit:xpu", runner=runner, expected_pins={"fingerprint": "abc"})
    assert code == 0, "\n".join(lines)
    ((image, command, options),) = runner.calls
    assert image == "xpukit:xpu" and command == ["python", "-m", "xpukit.runtime.image.doctor_probe"]
    # The probe runs with the same GPU passthrough as run/shell/test.
    assert options["devices"] == ["/dev/dri:/dev/dri:rwm"] and options["shm_size"] == "8g"
    assert "Data Center GPU Max 1550 via level_zero" in lines_for(lines, "ur-gpu")[0]
    assert "level_zero, opencl" in lines_for(lines, "ur-adapters")[0]
    assert "(2025.2, launch: setarg+launch(9))" in lines_for(lines, "ur")[0]
    assert "ocloc 25.18.33578: 9 targets (pvc, bmg, acm-g10, arl-h, mtl, lnl, ptl)" in lines_for(lines, "ocloc")[0]
    assert not [line for line in lines_for(lines, "ocloc") if line.startswith("WARN")]
    # Without the newest families (ocloc 26.27 builds them) the line says so, without a warning.
    assert (
        "OK    ocloc        not wcl/nvl-s/nvl-p/cri (ocloc 26.27 or later builds them" in lines_for(lines, "ocloc")[1]
    )
    assert "1.21.9" in lines_for(lines, "level-zero")[0]
    assert "oneAPI 2025.2" in lines_for(lines, "oneapi")[0]
    assert lines_for(lines, "manifest")[0].startswith("OK")
    assert lines_for(lines, "pins")[0].startswith("OK")


def test_gpu_host_but_no_ur_gpu_in_container_fails(tmp_path):
    report = xpu_report()
    report["ur"]["gpu"] = {"error": "no GPU device found through UR (platforms: none)"}
    code, lines = run(make_host(tmp_path, [Node()]), "img", runner=FakeRunner(report))
    (u,) = lines_for(lines, "ur-gpu")
    assert u.startswith("FAIL") and "--device /dev/dri" in u
    assert code == 1


def test_no_gpu_host_skips_the_ur_gpu_check(tmp_path):
    report = xpu_report()
    report["ur"]["gpu"] = {"error": "none"}
    code, lines = run(make_host(tmp_path, []), "img", runner=FakeRunner(report))
    assert lines_for(lines, "ur-gpu")[0].startswith("SKIP")
    assert code == 0


def test_missing_level_zero_and_adapter_fail_on_xpu(tmp_path):
    report = xpu_report(level_zero={"path": "", "version": "", "error": "libze_loader.so.1 not found"})
    report["ur"]["adapters"] = ["opencl"]
    code, lines = run(make_host(tmp_path, [Node()]), "img", runner=FakeRunner(report))
    assert lines_for(lines, "level-zero")[0].startswith("FAIL")
    assert lines_for(lines, "ur-adapters")[0].startswith("FAIL")
    assert code == 1


def test_old_ocloc_warns_on_xpu(tmp_path):
    report = xpu_report(ocloc={"path": "/usr/bin/ocloc", "version": "22.43.24595", "targets": ["pvc", "acm-g10"]})
    _, lines = run(make_host(tmp_path, [Node()]), "img", runner=FakeRunner(report))
    warn = [line for line in lines_for(lines, "ocloc") if line.startswith("WARN")]
    assert len(warn) == 1 and "cannot target bmg/arl-h/mtl/lnl/ptl" in warn[0]


def test_ur_module_absent_is_a_skip(tmp_path):
    report = xpu_report(ur={"status": "skip", "error": "xpukit.runtime.ur is not available in this image"})
    _, lines = run(make_host(tmp_path, []), "img", runner=FakeRunner(report))
    assert lines_for(lines, "ur")[0].startswith("SKIP")


def test_manifest_missing_fails(tmp_path):
    report = xpu_report(manifest={"data": None, "error": "/opt/xpukit/manifest.json not found"})
    code, lines = run(make_host(tmp_path, []), "img", runner=FakeRunner(report))
    (m,) = lines_for(lines, "manifest")
    assert m.startswith("FAIL") and "manifest.json not found" in m and code == 1


def test_installed_differs_from_manifest_fails(tmp_path):
    report = xpu_report()
    report["installed"]["triton"] = "3.3.0b1"
    code, lines = run(make_host(tmp_path, []), "img", runner=FakeRunner(report))
    assert any("triton 3.5.0+git9e237132 -> 3.3.0b1" in line for line in lines_for(lines, "manifest"))
    assert code == 1


def test_manifest_against_its_own_pins(tmp_path):
    report = xpu_report()
    report["manifest"]["data"]["pins"]["triton_commit"] = "197f5f843fd17deab1de1df1c6f17e60978ecdce"
    code, lines = run(make_host(tmp_path, []), "img", runner=FakeRunner(report))
    assert any("triton_commit pinned 197f5f84" in line for line in lines_for(lines, "manifest"))
    assert code == 1


def test_image_built_from_other_pins_warns(tmp_path):
    code, lines = run(
        make_host(tmp_path, []), "img", runner=FakeRunner(xpu_report()), expected_pins={"fingerprint": "new"}
    )
    (p,) = lines_for(lines, "pins")
    assert p.startswith("WARN") and "fingerprint: image abc, pins new" in p and "invoke build" in p
    assert code == 0


def test_cpu_profile_report(tmp_path):
    report = xpu_report(
        oneapi={"root": "", "releases": [], "version": "", "setvars": False},
        level_zero={"path": "", "version": "", "error": "not found"},
    )
    report["manifest"]["data"]["profile"] = "cpu"
    report["ur"]["adapters"] = ["level_zero", "opencl"]
    report["ur"]["gpu"] = {"error": "none"}
    report["ur"]["cpu"] = {"name": "Intel(R) Xeon(R)", "backend": "opencl"}
    code, lines = run(make_host(tmp_path, []), "img", runner=FakeRunner(report))
    assert lines_for(lines, "level-zero")[0].startswith("SKIP")
    assert lines_for(lines, "oneapi")[0].startswith("SKIP")
    assert lines_for(lines, "ur-cpu")[0].startswith("OK")
    assert code == 0


def test_image_not_found(tmp_path):
    runner = FakeRunner(raises=doctor_image.ImageUnavailable("image nope:latest not found"))
    code, lines = run(make_host(tmp_path, []), "nope:latest", runner=runner)
    (i,) = lines_for(lines, "image")
    assert i.startswith("FAIL") and "invoke build" in i and code == 1


def test_probe_without_json(tmp_path):
    code, lines = run(make_host(tmp_path, []), "img", runner=FakeRunner(stdout="Traceback...\n", code=1))
    (p,) = lines_for(lines, "probe")
    assert p.startswith("FAIL") and "exited 1" in p and code == 1


def test_probe_killed_by_a_signal_says_so(tmp_path):
    """A probe container ended by SIGKILL (docker kill, the OOM killer) or a crash is one line naming
    the signal, not "exited 137 without a report"."""
    code, lines = run(make_host(tmp_path, []), "img", runner=FakeRunner(stdout="", code=137))
    (p,) = lines_for(lines, "probe")
    assert p.startswith("FAIL") and "SIGKILL" in p and "out of memory" in p and code == 1
    code, lines = run(make_host(tmp_path, []), "img", runner=FakeRunner(stdout="", code=139))
    (p,) = lines_for(lines, "probe")
    assert p.startswith("FAIL") and "crashed" in p and "SIGSEGV" in p and code == 1


def test_sdk_runner_maps_a_missing_image():
    docker = pytest.importorskip("docker")

    class Containers:
        def create(self, *a, **k):
            raise docker.errors.ImageNotFound("no such image")

    class Client:
        containers = Containers()

    # The task's engine owns the runner now (doctor.sdk_runner is gone): its client is the fake.
    eng = engine.Engine("docker", _client=Client())
    with pytest.raises(doctor_image.ImageUnavailable):
        doctor.engine_runner(eng)("x", ["true"], {})


# ---- the probe itself ---------------------------------------------------------------------------


def test_probe_manifest(tmp_path):
    assert doctor_probe.probe_manifest(str(tmp_path / "none.json"))["error"].endswith("not found")
    (tmp_path / "m.json").write_text('{"profile": "xpu"}')
    assert doctor_probe.probe_manifest(str(tmp_path / "m.json")) == {"data": {"profile": "xpu"}, "error": ""}
    (tmp_path / "bad.json").write_text("{")
    assert "unreadable" in doctor_probe.probe_manifest(str(tmp_path / "bad.json"))["error"]


def test_probe_level_zero_and_oneapi_from_fake_trees(tmp_path, monkeypatch):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "libze_loader.so.1.21.9").write_text("")
    (lib / "libze_loader.so.1").symlink_to("libze_loader.so.1.21.9")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(lib))
    ze = doctor_probe.probe_level_zero()
    assert ze["path"] == str(lib / "libze_loader.so.1") and ze["version"] == "1.21.9"

    root = tmp_path / "oneapi"
    (root / "compiler/2025.2").mkdir(parents=True)
    (root / "compiler/latest").symlink_to("2025.2")
    monkeypatch.setenv("ONEAPI_ROOT", str(root))
    monkeypatch.setenv("CMPLR_ROOT", str(root / "compiler/latest"))
    monkeypatch.setenv("SETVARS_COMPLETED", "1")
    one = doctor_probe.probe_oneapi()
    assert one["releases"] == ["2025.2"] and one["version"] == "2025.2" and one["setvars"]


def test_probe_prints_one_json_object(monkeypatch, capsys):
    # Native sections replaced: this checks the report's shape, not this host's runtime.
    monkeypatch.setattr(doctor_probe, "probe_ur", lambda: {"status": "skip", "error": "test"})
    monkeypatch.setattr(doctor_probe, "probe_ocloc", lambda: 1 / 0)
    assert doctor_probe.main() == 0
    report = doctor_image.parse_probe_output(capsys.readouterr().out)
    assert report["probe_version"] == doctor_probe.PROBE_VERSION
    assert set(report) >= {"oneapi", "level_zero", "ur", "ocloc", "installed", "manifest"}
    assert report["ocloc"]["error"].startswith("probe failed")
    assert report["installed"]["python"]
