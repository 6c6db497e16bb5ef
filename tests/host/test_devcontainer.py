"""The generated devcontainer: the committed default equals what the kit generates, GPU options
are the ones `invoke shell` uses (fake GPU hosts, as in the doctor tests: no Intel GPU here), and
the devcontainer CLI (npm, pinned in env/npm) brings it up on a real engine and runs the demo and
the container tests inside."""

from __future__ import annotations

import pytest

from tests.support.fakehost import Node, make_host
from xpukit.host import engine, gpu, settings
from xpukit.host.run import containers, devcontainer
from xpukit.layout import REPO_ROOT

COMMITTED = REPO_ROOT / ".devcontainer" / "devcontainer.json"


@pytest.mark.unit
def test_committed_default_is_generated():
    assert devcontainer.load(COMMITTED) == devcontainer.config("xpukit:cpu", "cpu", "xpukit-cache")
    assert COMMITTED.read_text() == devcontainer.render(devcontainer.config("xpukit:cpu", "cpu", "xpukit-cache"))


def _flags_as_options(flags: list[str]) -> dict:
    """docker run flags -> the docker SDK keyword arguments `invoke shell` passes."""
    out: dict = {"devices": [], "volumes": {}, "group_add": []}
    it = iter(flags)
    for flag in it:
        value = next(it)
        if flag == "--device":
            out["devices"].append(f"{value}:{value}:rwm")
        elif flag == "-v":
            host, container, mode = value.split(":")
            out["volumes"][host] = {"bind": container, "mode": mode}
        elif flag == "--group-add":
            out["group_add"].append(value)
        elif flag == "--shm-size":
            out["shm_size"] = value
    return {k: v for k, v in out.items() if v}


@pytest.mark.unit
@pytest.mark.parametrize("nodes", [[Node()], [Node(), Node(slot="0000:9a:00.0")], [Node(mode=0o666)], []])
def test_gpu_options_are_the_shells(tmp_path, nodes):
    """Mock: fake sysfs/dev trees stand in for Intel GPU hosts (none exists here)."""
    host = make_host(tmp_path, nodes)
    options = gpu.gpu_run_options(host.sysfs_root, host.dev_root, host.host_root)
    generated = devcontainer.config("xpukit:xpu", "xpu", "xpukit-cache", options)
    if options.passthrough:
        assert _flags_as_options(generated["runArgs"]) == options.docker_kwargs()
        assert "--device" in generated["runArgs"]
    else:
        assert generated["runArgs"] == []


@pytest.mark.unit
@pytest.mark.parametrize(("kind", "rootless"), [("docker", False), ("podman", False), ("podman", True)])
def test_gpu_options_follow_the_engine_in_shell_and_devcontainer(tmp_path, monkeypatch, kind, rootless):
    """Mock: a fake Intel GPU host. `invoke shell` and `invoke devcontainer` take the same options
    from xpukit.host.run.containers.gpu_options; rootless podman swaps the render gid for keep-groups."""
    host = make_host(tmp_path, [Node()])
    real_nodes, real_options = gpu.render_nodes, gpu.gpu_run_options

    def render_group_109(*args):  # the render node's group, as on a real host (the fake file is root's)
        return [n.__class__(**{**n.__dict__, "gid": 109}) for n in real_nodes(*args)]

    monkeypatch.setattr(gpu, "render_nodes", render_group_109)
    monkeypatch.setattr(gpu, "gpu_run_options", lambda: real_options(host.sysfs_root, host.dev_root, host.host_root))
    monkeypatch.setattr(engine.podman_mod, "rootless", lambda euid=None: rootless)  # whoever runs the test
    ctx = settings.Context(settings.Settings(profile="xpu", engine=kind), {}, lambda: (True, "fake"), lambda _m: None)
    # An endpoint given: nothing is asked of it, and no podman service is started.
    ctx.engine = engine.Engine(kind, "unix:///nowhere.sock", say=lambda _m: None)
    shell = containers.container_options(ctx)
    found = containers.gpu_options(ctx)
    generated = devcontainer.config("xpukit:xpu", "xpu", "xpukit-cache", found)
    assert _flags_as_options(generated["runArgs"]) == {k: shell[k] for k in ("devices", "group_add", "shm_size")} | {
        "volumes": {h: v for h, v in shell["volumes"].items() if h.startswith("/dev/")}
    }
    assert shell["group_add"] == (["keep-groups"] if kind == "podman" and rootless else ["109"])


@pytest.mark.unit
def test_write_is_atomic_and_idempotent(tmp_path):
    path = tmp_path / ".devcontainer" / "devcontainer.json"
    content = devcontainer.config("xpukit:cpu", "cpu", "v")
    assert devcontainer.write(path, content) is True
    assert devcontainer.write(path, content) is False
    assert [p.name for p in path.parent.iterdir()] == ["devcontainer.json"]
