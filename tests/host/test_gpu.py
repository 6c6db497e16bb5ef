"""Intel GPU detection and GPU passthrough options, against fake sysfs and /dev trees."""

from __future__ import annotations

import pytest

from tests.support.fakehost import Node, make_host
from xpukit.errors import XpukitError
from xpukit.host import gpu

pytestmark = pytest.mark.unit


def test_pvc_host_is_detected_with_reason(tmp_path):
    h = make_host(tmp_path, [Node()])
    ok, why = gpu.has_intel_gpu(h.sysfs_root, h.dev_root)
    assert ok
    assert why == "renderD128 is an Intel GPU (8086:0bd5, driver i915)"


def test_render_node_fields(tmp_path):
    h = make_host(tmp_path, [Node(mode=0o660)])
    (n,) = gpu.render_nodes(h.sysfs_root, h.dev_root)
    assert (n.name, n.vendor, n.device, n.driver, n.pci_slot) == (
        "renderD128",
        "8086",
        "0bd5",
        "i915",
        "0000:3a:00.0",
    )
    assert n.model == "Data Center GPU Max 1550" and n.family == "pvc"
    assert n.dev_path == "/dev/dri/renderD128"
    assert n.exists and n.mode == 0o660 and n.gid == h.node_gid()


def test_pvc_host_run_options(tmp_path):
    h = make_host(tmp_path, [Node()])
    opts = gpu.gpu_run_options(h.sysfs_root, h.dev_root, h.host_root)
    gid = str(h.node_gid())
    assert opts.passthrough
    kwargs = opts.docker_kwargs()
    assert kwargs["devices"] == ["/dev/dri:/dev/dri:rwm"]
    assert kwargs["volumes"] == {"/dev/dri/by-path": {"bind": "/dev/dri/by-path", "mode": "ro"}}
    assert kwargs["shm_size"] == "8g"
    if gid != "0":
        assert kwargs["group_add"] == [gid]
        assert opts.cli_flags() == [
            "--device",
            "/dev/dri",
            "-v",
            "/dev/dri/by-path:/dev/dri/by-path:ro",
            "--group-add",
            gid,
            "--shm-size",
            "8g",
        ]


def test_group_add_uses_the_render_nodes_gid_and_never_zero(tmp_path, monkeypatch):
    h = make_host(tmp_path, [Node(), Node(device="0x0bda", slot="0000:9a:00.0")])
    real = gpu.render_nodes

    def with_gids(*args):
        nodes = real(*args)
        return [nodes[0].__class__(**{**n.__dict__, "gid": g}) for n, g in zip(nodes, (109, 109), strict=True)]

    monkeypatch.setattr(gpu, "render_nodes", with_gids)
    assert gpu.gpu_run_options(h.sysfs_root, h.dev_root, h.host_root).group_add == ("109",)

    def root_owned(*args):
        return [n.__class__(**{**n.__dict__, "gid": 0}) for n in real(*args)]

    monkeypatch.setattr(gpu, "render_nodes", root_owned)
    opts = gpu.gpu_run_options(h.sysfs_root, h.dev_root, h.host_root)
    assert opts.group_add == ()
    assert any("group 0" in note for note in opts.notes)


def test_custom_shm_size(tmp_path):
    h = make_host(tmp_path, [Node()])
    opts = gpu.gpu_run_options(h.sysfs_root, h.dev_root, h.host_root, shm_size="16g")
    assert opts.docker_kwargs()["shm_size"] == "16g"
    assert opts.cli_flags()[-2:] == ["--shm-size", "16g"]


def test_host_without_gpu(tmp_path):
    h = make_host(tmp_path, [])
    ok, why = gpu.has_intel_gpu(h.sysfs_root, h.dev_root)
    assert not ok and "no DRM render node" in why
    opts = gpu.gpu_run_options(h.sysfs_root, h.dev_root, h.host_root)
    assert not opts.passthrough
    assert opts.docker_kwargs() == {"shm_size": "8g"}
    assert opts.cli_flags() == ["--shm-size", "8g"]
    assert any("no GPU passthrough" in n for n in opts.notes)


def test_require_raises_a_kit_error_on_a_host_without_gpu(tmp_path):
    h = make_host(tmp_path, [])
    with pytest.raises(gpu.NoIntelGpuError) as info:
        gpu.gpu_run_options(h.sysfs_root, h.dev_root, h.host_root, require=True)
    assert isinstance(info.value, XpukitError)
    assert "--profile cpu" in info.value.fix


def test_missing_sysfs_tree_means_no_gpu(tmp_path):
    assert gpu.has_intel_gpu(str(tmp_path / "nothing"), str(tmp_path / "nothing"))[0] is False


def test_other_vendor_is_not_intel(tmp_path):
    h = make_host(tmp_path, [Node(vendor="0x10de", device="0x2330", driver="nvidia")])
    ok, why = gpu.has_intel_gpu(h.sysfs_root, h.dev_root)
    assert not ok and "10de:2330" in why
    assert not gpu.gpu_run_options(h.sysfs_root, h.dev_root, h.host_root).passthrough


def test_intel_node_in_sysfs_without_dev_node(tmp_path):
    h = make_host(tmp_path, [Node(dev_node=False)])
    ok, why = gpu.has_intel_gpu(h.sysfs_root, h.dev_root)
    assert not ok and "/dev/dri/renderD128 does not exist" in why


def test_bmg_on_xe_and_unknown_ids(tmp_path):
    h = make_host(tmp_path, [Node(device="0xe20b", driver="xe"), Node(device="0xabcd", slot="0000:05:00.0")])
    bmg, unknown = gpu.render_nodes(h.sysfs_root, h.dev_root)
    assert bmg.driver == "xe" and bmg.family == "bmg" and "Battlemage" in bmg.model
    assert unknown.model == "Intel GPU abcd" and unknown.family == ""
    assert "(8086:e20b, driver xe)" in gpu.has_intel_gpu(h.sysfs_root, h.dev_root)[1]
    assert "+1 more" in gpu.has_intel_gpu(h.sysfs_root, h.dev_root)[1]


def test_no_driver_bound(tmp_path):
    h = make_host(tmp_path, [Node(driver="")])
    (n,) = gpu.intel_render_nodes(h.sysfs_root, h.dev_root)
    assert n.driver == "" and "no driver bound" in n.describe()


@pytest.mark.parametrize("pci_id", ["0bd5", "0bda", "56a0", "e20b", "7d55", "64a0"])
def test_model_table_covers_the_named_ids(pci_id):
    assert pci_id in gpu.PCI_MODELS


def test_wsl_host(tmp_path):
    h = make_host(tmp_path, [], wsl=True)
    ok, why = gpu.has_intel_gpu(h.sysfs_root, h.dev_root)
    assert not ok and "/dev/dxg" in why and "--profile xpu" in why
    opts = gpu.gpu_run_options(h.sysfs_root, h.dev_root, h.host_root)
    kwargs = opts.docker_kwargs()
    assert kwargs["devices"] == ["/dev/dxg:/dev/dxg:rwm"]
    assert kwargs["volumes"] == {"/usr/lib/wsl": {"bind": "/usr/lib/wsl", "mode": "ro"}}
    assert "group_add" not in kwargs
    assert opts.cli_flags() == [
        "--device",
        "/dev/dxg",
        "-v",
        "/usr/lib/wsl:/usr/lib/wsl:ro",
        "--shm-size",
        "8g",
    ]


def test_wsl_without_libs_notes_it(tmp_path):
    h = make_host(tmp_path, [], wsl=True, wsl_libs=False)
    opts = gpu.gpu_run_options(h.sysfs_root, h.dev_root, h.host_root)
    assert opts.devices == ("/dev/dxg",) and opts.volumes == ()
    assert any("/usr/lib/wsl is missing" in n for n in opts.notes)


ME = gpu.UserIds(1000, frozenset({1000}))


@pytest.mark.parametrize(
    ("mode", "uid", "gid", "user", "expected"),
    [
        (0o660, 0, 109, gpu.UserIds(0, frozenset({0})), True),  # root passes regardless
        (0o000, 0, 109, gpu.UserIds(0, frozenset({0})), True),
        (0o660, 0, 109, gpu.UserIds(1000, frozenset({1000, 109})), True),  # in the render group
        (0o660, 0, 109, ME, False),  # outside the render group
        (0o666, 0, 109, ME, True),  # world read-write
        (0o640, 0, 109, gpu.UserIds(1000, frozenset({109})), False),  # group may only read
        (0o600, 1000, 109, ME, True),  # owner
        (0o066, 1000, 109, ME, False),  # owner bits win even when others may
    ],
)
def test_can_read_write(mode, uid, gid, user, expected):
    assert gpu.can_read_write(mode, uid, gid, user) is expected


def test_user_outside_render_group_cannot_open(tmp_path):
    h = make_host(tmp_path, [Node(mode=0o660)])
    (n,) = gpu.render_nodes(h.sysfs_root, h.dev_root)
    outsider = gpu.UserIds(54321, frozenset({54321}))
    assert not n.accessible_by(outsider)
    assert n.accessible_by(gpu.UserIds(54321, frozenset({54321, n.gid})))


def test_options_compose_with_the_engines_run_line(tmp_path):
    processes = pytest.importorskip("xpukit.host.processes")
    h = make_host(tmp_path, [Node()])
    kwargs = gpu.gpu_run_options(h.sysfs_root, h.dev_root, h.host_root).docker_kwargs()
    line = processes.format_run_cli("docker", "img", ["true"], kwargs)
    assert "/dev/dri:/dev/dri:rwm" in line and "/dev/dri/by-path:/dev/dri/by-path:ro" in line
    assert line[line.index("--shm-size") + 1] == "8g"
