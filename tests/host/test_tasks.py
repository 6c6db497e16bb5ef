"""The invoke tasks as a user runs them: dry runs print exact commands, bad input is one line."""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.invoke import invoke
from xpukit import layout
from xpukit.host import settings
from xpukit.host.image import build
from xpukit.host.run import containers
from xpukit.host.versions import pins

pytestmark = pytest.mark.unit
ROOT = layout.REPO_ROOT


def one_line_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode != 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, result.stderr
    return errors[0]


def build_command(result: subprocess.CompletedProcess) -> list[str]:
    assert result.returncode == 0, result.stderr
    line = [ln for ln in result.stdout.splitlines() if " build " in ln][-1]
    return shlex.split(line)


def test_list_has_one_line_help_per_task():
    result = invoke("--list")
    assert result.returncode == 0
    for name in ("build", "test", "demo-ur", "shell", "base", "pins", "clean", "compile", "zebin-info"):
        lines = [ln for ln in result.stdout.splitlines() if ln.strip().startswith(name + " ")]
        assert lines, f"{name} missing from invoke --list"


@pytest.mark.parametrize("profile", ["cpu", "xpu"])
def test_build_dry_run_carries_every_pin(profile):
    cmd = build_command(invoke("build", "--profile", profile, "--dry-run"))
    args = dict(a.split("=", 1) for a in cmd[cmd.index("--build-arg") :: 1] if "=" in a and a[0].isupper())
    loaded = pins.load().profile(profile)
    expected = build.build_args(loaded, loaded.base_reference)
    for key, value in expected.items():
        if key == "BASE_IMAGE":  # where an engine answers, the dry run names the base a build would use
            assert args["BASE_IMAGE"] in (loaded.base_reference, build.local_base_name(loaded)), args["BASE_IMAGE"]
        else:
            assert args.get(key) == value, key
    tags = [cmd[i + 1] for i, a in enumerate(cmd) if a == "-t"]
    assert tags[1] == f"xpukit:{profile}" and tags[0].startswith(f"xpukit:{profile}-")
    assert cmd[-1] == str(ROOT)


def test_ca_bundle_becomes_a_secret(tmp_path):
    bundle = tmp_path / "corp.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    cmd = build_command(invoke("build", "--profile", "cpu", "--dry-run", "--ca-bundle", str(bundle)))
    assert cmd[cmd.index("--secret") + 1] == f"id=ca_bundle,src={bundle}"
    assert not any(str(bundle) in a for a in cmd if a.startswith("BASE") or a == "--build-arg")


def test_source_label_comes_from_the_origin_remote_or_is_left_out(tmp_path, monkeypatch):
    """The image's org.opencontainers.image.source is the checkout's origin remote; a checkout
    without one gets no source label, never a guessed address."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    assert build.source_url(repo) == ""
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", "https://example.org/team/kit.git"], check=True)
    assert build.source_url(repo) == "https://example.org/team/kit.git"
    cpu = pins.load().profile("cpu")
    for remote in ("", "https://example.org/team/kit.git"):
        monkeypatch.setattr(build, "source_url", lambda root, remote=remote: remote)
        cmd = build.plan(ROOT, cpu, "base:1", "xpukit", None).command
        labels = [cmd[i + 1] for i, part in enumerate(cmd) if part == "--label"]
        assert labels == ([f"org.opencontainers.image.source={remote}"] if remote else [])
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "image.source" not in dockerfile and "github.com/xpukit" not in dockerfile


def test_content_tag_follows_the_build_inputs(tmp_path):
    cpu = pins.load().profile("cpu")
    args = build.build_args(cpu, "base:1")
    first = build.content_hash(ROOT, args)
    assert first == build.content_hash(ROOT, {**args, "XPUKIT_REVISION": "other"})
    assert first != build.content_hash(ROOT, {**args, "BASE_IMAGE": "base:2"})


def test_profile_auto_says_which_and_why_once(tmp_path, capsys):
    import functools

    from tests.support.fakehost import Node, make_host
    from xpukit.host import gpu

    def context(host, profile="auto"):
        detect = functools.partial(gpu.has_intel_gpu, host.sysfs_root, host.dev_root)
        return settings.Context(settings.resolve({"profile": profile}, {}, {}), {}, detect)

    no_gpu = context(make_host(tmp_path / "none"))
    assert no_gpu.profile == "cpu" and no_gpu.profile == "cpu"
    assert context(make_host(tmp_path / "pvc", [Node()])).profile == "xpu"
    out = capsys.readouterr().out
    assert out.count("profile auto -> cpu (") == 1 and out.count("profile auto -> xpu (") == 1
    assert context(make_host(tmp_path / "pvc2", [Node()]), "cpu").profile == "cpu"
    assert "profile auto" not in capsys.readouterr().out


def test_profile_auto_through_the_task():
    result = invoke("build", "--dry-run")
    assert result.returncode == 0
    assert "profile auto -> " in result.stdout


def test_xpu_variants_reach_the_build_args():
    cmd = build_command(
        invoke(
            "build",
            "--profile",
            "xpu",
            "--dry-run",
            "--triton",
            "blog",
            "--llvm",
            "--torch",
            "none",
            "--torch-arch-list",
            "pvc",
        )
    )
    joined = " ".join(cmd)
    assert "TRITON_COMMIT=197f5f843fd17deab1de1df1c6f17e60978ecdce" in joined
    assert "LLVM_SOURCE=source" in joined and "TORCH_SOURCE=none" in joined and "TORCH_XPU_ARCH_LIST=pvc" in joined


def test_test_and_demo_dry_runs_show_the_container_command():
    result = invoke("demo-ur", "--where", "container", "--profile", "cpu", "--dry-run", "-n", "4096", "--scale", "3")
    assert result.returncode == 0, result.stderr
    run = [ln for ln in result.stdout.splitlines() if " run " in ln][-1]
    assert f"{ROOT}:/workspace:ro" in run and "xpukit-cache:/home/xpukit/.cache:rw" in run
    assert run.endswith("python /workspace/examples/xpu_triton_ur.py --n 4096 --scale 3")
    result = invoke("test", "--where", "container", "--profile", "cpu", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "-m pytest -m 'unit and not docker' --junitxml" in result.stdout and "-m 'container or gpu'" in result.stdout


def test_the_dpnp_example_runs_in_the_dpnp_image_with_or_without_with():
    """`--example dpnp` can only run where dpnp is: it names the dpnp layer's tag (`--with dpnp`
    implied, and said), the same tag as with the flag."""
    runs = {}
    for flags in ((), ("--with", "dpnp")):
        result = invoke("demo-ur", "--where", "container", "--profile", "cpu", "--dry-run", "--example", "dpnp", *flags)
        assert result.returncode == 0, result.stderr
        runs[flags] = [ln for ln in result.stdout.splitlines() if " run " in ln][-1]
        assert runs[flags].endswith("python /workspace/examples/dpnp_triton.py"), runs[flags]
        assert " xpukit:cpu-dpnp-" in runs[flags]
        said = result.stdout + result.stderr
        assert ("runs in the dpnp layer's image: --with dpnp" in said) == (not flags), said
    assert runs[()] == runs[("--with", "dpnp")]


def test_test_suites_select_by_marker():
    """quick (the default) is host logic and the image's tests; engine the docker-marked suites
    alone; all both; smoke all's sharing_smoke tests. Each suite's pytest lines, as a dry run prints them."""
    expected = {
        "quick": ("unit and not docker", "container or gpu"),
        "engine": ("docker", None),
        "all": ("unit or docker", "container or gpu"),
        "smoke": ("(unit or docker) and sharing_smoke", "(container or gpu) and sharing_smoke"),
    }
    for suite, (host, container) in expected.items():
        result = invoke("test", "--where", "container", "--profile", "cpu", "--suite", suite, "--dry-run")
        assert result.returncode == 0, result.stderr
        lines = [shlex.split(ln) for ln in result.stdout.splitlines() if "-m pytest" in ln or " run --rm " in ln]
        markers = [line[line.index("-m", line.index("pytest")) + 1] for line in lines]
        assert markers == [host] + ([container] if container else []), (suite, result.stdout)
    on_host = invoke("test", "--where", "host", "--suite", "quick", "--dry-run")
    assert "-m '(unit or container or gpu) and not docker'" in on_host.stdout
    line = one_line_error(invoke("test", "--suite", "everything", "--dry-run"))
    assert "unknown suite 'everything'" in line and "quick, engine, all, smoke" in line


# ---------------------------------------------------------------- bad input: one line, non-zero


def test_unknown_profile():
    line = one_line_error(invoke("build", "--profile", "gpu", "--dry-run"))
    assert "unknown profile 'gpu'" in line and "auto, cpu, xpu" in line


@pytest.mark.parametrize("task", ["compile", "kernel-report"])
def test_empty_target_is_one_line(task):
    """`--target ''` used to end in a traceback (the targets were parsed outside the error boundary)."""
    result = invoke(task, "examples/kernels.py:scale_kernel", "--target", "", "--dry-run")
    assert result.returncode == 2
    line = one_line_error(result)
    assert "no target given" in line and "--target pvc" in line


def test_unknown_where():
    line = one_line_error(invoke("test", "--where", "cloud", "--dry-run"))
    assert "unknown where 'cloud'" in line and "auto, container, host" in line


def test_malformed_pins(tmp_path):
    bad = tmp_path / "pins.toml"
    bad.write_text(
        pins.DEFAULT_PINS.read_text().replace('digest = ""  # unknown here', 'digest = "latest"  # unknown here', 1)
    )
    line = one_line_error(invoke("build", "--profile", "cpu", "--dry-run", env={"XPUKIT_PINS_FILE": str(bad)}))
    assert str(bad) in line and "cpu.base.digest" in line


def test_missing_ca_bundle(tmp_path):
    line = one_line_error(invoke("build", "--profile", "cpu", "--dry-run", "--ca-bundle", str(tmp_path / "no.pem")))
    assert "no.pem does not exist" in line and "--ca-bundle" in line


def test_no_engine_says_how_to_start_one(tmp_path):
    line = one_line_error(invoke("build", "--profile", "cpu", env={"DOCKER_HOST": f"unix://{tmp_path}/none.sock"}))
    assert "no Docker engine answers" in line and "dockerd" in line


def test_buildkit_unavailable_names_the_fix(tmp_path):
    """A docker CLI >= 23 without its buildx plugin (a stand-in script: its answers are the point)."""
    fake = tmp_path / "docker"
    fake.write_text(
        '#!/bin/sh\n[ "$1" = "--version" ] && echo "Docker version 28.2.2, build x" && exit 0\n'
        'echo "docker: unknown command: docker $1" >&2; exit 1\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    line = one_line_error(invoke("build", "--profile", "cpu", env={"XPUKIT_DOCKER_CLI": str(fake)}))
    assert "BuildKit is unavailable" in line and "buildx" in line and "XPUKIT_DOCKER_CLI" in line


def test_base_needs_root_or_debootstrap():
    from xpukit.errors import XpukitError
    from xpukit.host.image.base import check_prerequisites

    with pytest.raises(XpukitError, match="must run as root"):
        check_prerequisites(euid=1000)
    with pytest.raises(XpukitError, match="debootstrap is not installed"):
        check_prerequisites(euid=0, which=lambda: None)


def test_base_dry_run_shows_debootstrap_and_import():
    result = invoke("base", "--debootstrap", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "debootstrap --variant=minbase bookworm ROOTFS" in result.stdout
    assert "import" in result.stdout and "xpukit-base:bookworm-slim" in result.stdout


def test_pins_task_shows_args_and_checks_locks():
    result = invoke("pins", "--profile", "cpu", "--check")
    assert result.returncode == 0, result.stderr
    assert "TRITON_VERSION=3.3.0b1" in result.stdout and "not pinned by digest" in result.stdout
    assert "lock out of date" not in result.stdout


def test_base_choice_points_to_invoke_base():
    cpu = pins.load().profile("cpu")
    from xpukit.errors import XpukitError

    with pytest.raises(XpukitError) as info:
        build.choose_base(cpu, "", lambda ref: False, lambda ref: False, lambda m: None)
    assert "invoke base" in info.value.fix
    assert build.choose_base(cpu, "", lambda ref: ref == "xpukit-base:bookworm-slim", None, print) == (
        "xpukit-base:bookworm-slim"
    )


def test_xpu_runs_pass_the_gpu_through(tmp_path, monkeypatch):
    """run/shell/test/demo compose GPU flags from the host's render nodes (a fake PVC host's sysfs
    and /dev trees stand in for a GPU host; the detection code is the real one)."""
    import functools

    from tests.support.fakehost import Node, make_host
    from xpukit.host import gpu, processes

    host = make_host(tmp_path, [Node()])
    if os.geteuid() == 0:
        os.chown(host.node_path(), -1, 109)  # a render group, as on a real host (never group 0)
    real = gpu.gpu_run_options
    monkeypatch.setattr(gpu, "gpu_run_options", functools.partial(real, host.sysfs_root, host.dev_root, host.host_root))
    xpu = settings.Context(settings.resolve({"profile": "xpu"}, {}, {}), {})
    options = containers.container_options(xpu)
    assert options["devices"] == ["/dev/dri:/dev/dri:rwm"]
    assert options["volumes"]["/dev/dri/by-path"] == {"bind": "/dev/dri/by-path", "mode": "ro"}
    assert options.get("group_add", []) == ([str(host.node_gid())] if host.node_gid() else [])
    assert options["shm_size"] == "8g"
    line = " ".join(processes.format_run_cli("docker", "xpukit:xpu", ["bash"], options))
    assert "--device /dev/dri:/dev/dri:rwm" in line
    assert f"--group-add {host.node_gid()}" in line or not host.node_gid()
    assert "--shm-size 8g" in line and f"{ROOT}:/workspace:ro" in line
    cpu = settings.Context(settings.resolve({"profile": "cpu"}, {}, {}), {})
    assert "devices" not in containers.container_options(cpu)


def test_host_run_without_the_runtime_is_one_line(tmp_path):
    """A host interpreter with invoke but no Triton: the demo on the host says what to install or
    where to run it, in one line."""
    import importlib.metadata
    import shutil

    import invoke as invoke_pkg
    import yaml

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = tmp_path / "site"
    # invoke (with its metadata, which its entry point reads) and PyYAML: the host tools, no runtime.
    shutil.copytree(Path(invoke_pkg.__file__).parent, site / "invoke")
    shutil.copytree(Path(yaml.__file__).parent, site / "yaml")
    dist = importlib.metadata.distribution("invoke")
    shutil.copytree(
        Path(dist.locate_file(f"invoke-{dist.version}.dist-info")), site / f"invoke-{dist.version}.dist-info"
    )
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{site}", "PYTHONNOUSERSITE": "1"}
    env.pop("CI", None)
    python = str(venv / "bin" / "python")
    assert subprocess.run([python, "-c", "import triton"], env=env, capture_output=True).returncode != 0
    result = subprocess.run([python, "-m", "invoke", "demo-ur", "--where", "host"], cwd=ROOT, env=env,
                            capture_output=True, text=True, check=False)  # fmt: skip
    line = one_line_error(result)
    assert "no kit runtime" in line and "env/lock/cpu.txt" in line


def test_no_engine_reports_container_tests_not_run(tmp_path):
    """Where no engine answers, `invoke test` runs the host tests, reports the container tests as not
    run with the reason, and fails only when XPUKIT_REQUIRE_DOCKER=1."""
    env = {"DOCKER_HOST": f"unix://{tmp_path}/none.sock", "XPUKIT_REQUIRE_DOCKER": ""}
    args = ("test", "--profile", "cpu", "--pytest-args", "-q -p no:cacheprovider -k test_real_pins_load")
    result = invoke(*args, env=env)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "container tests: not run (no Docker engine answers" in result.stdout
    assert "xpukit: 1 passed, 0 failed" in result.stdout
    required = invoke(*args, env={**env, "XPUKIT_REQUIRE_DOCKER": "1"})
    assert required.returncode == 1
    assert "XPUKIT_REQUIRE_DOCKER=1 but the container tests could not run" in required.stderr


def test_settings_precedence_flag_env_yaml_default():
    config = settings
    yaml_cfg = {"profile": "xpu", "image": "from-yaml"}
    assert config.resolve({}, {}, {}).profile == "auto"
    assert config.resolve({}, yaml_cfg, {}).image == "from-yaml"
    assert config.resolve({}, yaml_cfg, {"XPUKIT_IMAGE": "from-env"}).image == "from-env"
    assert config.resolve({"profile": "cpu"}, yaml_cfg, {"XPUKIT_PROFILE": "xpu"}).profile == "cpu"
    assert config.resolve({}, {}, {"DOCKER_HOST": "unix:///x.sock"}).docker_host == "unix:///x.sock"


def test_invoke_yaml_is_read(tmp_path):
    """The tasks read the `xpukit:` section of the invoke.yaml beside tasks.py."""
    import shutil

    shutil.copy2(ROOT / "tasks.py", tmp_path / "tasks.py")
    (tmp_path / "invoke.yaml").write_text("xpukit:\n  image: team/xpukit\n  profile: cpu\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XPUKIT_PROFILE": "", "XPUKIT_IMAGE": ""}
    env.pop("CI", None)
    result = subprocess.run([sys.executable, "-m", "invoke", "build", "--dry-run"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, check=False)  # fmt: skip
    cmd = build_command(result)
    tags = [cmd[i + 1] for i, a in enumerate(cmd) if a == "-t"]
    assert tags[1] == "team/xpukit:cpu" and "profile auto" not in result.stdout


def test_clean_and_shell_dry_runs():
    result = invoke("clean", "--dry-run", "--volumes", "--build-cache")
    assert result.returncode == 0, result.stderr
    assert "would remove every xpukit:* image" in result.stdout and "would remove volume xpukit-cache" in result.stdout
    assert "builder prune -f" in result.stdout
    result = invoke("shell", "--profile", "cpu", "--dry-run", "--command", "pytest -q")
    assert result.returncode == 0, result.stderr
    line = result.stdout.strip().splitlines()[-1]
    assert shlex.split(line)[-3:] == ["bash", "-c", "pytest -q"] and " -it " in line


def test_arguments_after_double_dash_reach_pytest():
    result = invoke("test", "--where", "host", "--dry-run", "--", "-k", "zebin and not gpu")
    assert result.returncode == 0, result.stderr
    line = next(ln for ln in result.stdout.splitlines() if "-m pytest" in ln)
    assert shlex.split(line)[-2:] == ["-k", "zebin and not gpu"]
