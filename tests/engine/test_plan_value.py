"""The plan as a value: what a dry run prints is exactly what the real run executes.

`invoke build` and `invoke test` are run twice, with --dry-run and for real, with
XPUKIT_RECORD_COMMANDS naming a file where the real run appends every command it executes (the
build CLI's line, the host's pytest line, the container's `docker run` equivalent of the SDK call).
The two are compared as they are. The checks that need no network come first, in dry runs too.
"""

from __future__ import annotations

import difflib
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.invoke import invoke_unrecorded
from xpukit import layout
from xpukit.host import processes, settings

ROOT = layout.REPO_ROOT


def same_lines(executed: Path, printed: list[str]) -> None:
    """The executed lines are the printed ones; on a difference, show it word by word."""
    ran = executed.read_text().splitlines() if executed.exists() else []
    if ran != printed:
        words = difflib.unified_diff(" ".join(printed).split(), " ".join(ran).split(), "dry run", "real run", n=2)
        pytest.fail("the real run executed other commands than the dry run printed:\n" + "\n".join(words))


def commands_printed(result: subprocess.CompletedProcess) -> list[str]:
    """A dry run's command lines (its `xpukit:` lines are progress, not commands)."""
    assert result.returncode == 0, result.stderr
    return [line for line in result.stdout.splitlines() if line and not line.startswith("xpukit:")]


@pytest.mark.docker
def test_the_build_dry_run_is_the_command_the_build_runs(test_image, docker_client, tmp_path):
    """`invoke build --dry-run` and `invoke build` on the same checkout: the same one line.

    The real build is BuildKit's, on this engine, from the tested image's cached layers (seconds);
    it tags a separate image name, removed afterwards."""
    record = tmp_path / "executed.txt"
    env = {"XPUKIT_IMAGE": "xpukit-plan-test", "XPUKIT_ENGINE": "docker"}
    dry = commands_printed(invoke_unrecorded("build", "--profile", "cpu", "--dry-run", env=env))
    real = invoke_unrecorded("build", "--profile", "cpu", "--rebuild", env={**env, processes.RECORD_ENV: str(record)})
    try:
        assert real.returncode == 0, real.stdout[-2000:] + real.stderr
        same_lines(record, dry[-1:])
    finally:
        # Only this test's names: the same image also carries the tested image's tags.
        for image in docker_client.images.list(name="xpukit-plan-test"):
            for tag in image.tags:
                if tag.startswith("xpukit-plan-test:"):
                    docker_client.images.remove(tag, noprune=True)


@pytest.mark.docker
def test_the_test_dry_run_is_the_commands_the_tests_run(test_image, tmp_path):
    """`invoke test --dry-run` and `invoke test`: the host's pytest line (with its environment) and
    the container's run line are the ones executed. TMPDIR is this test's own, so the results
    folder is not the one the outer `invoke test` holds."""
    record = tmp_path / "executed.txt"
    (tmp_path / "tmp").mkdir()
    env = {"TMPDIR": str(tmp_path / "tmp"), "XPUKIT_IMAGE": test_image.split(":")[0]}
    task = ["test", "--where", "container", "--profile", "cpu"]
    pytest_args = ["--", "tests/host/test_dockerfile.py", "-k", "no_such_test"]
    dry = commands_printed(invoke_unrecorded(*task, "--dry-run", *pytest_args, env=env))
    if f"XPUKIT_TEST_IMAGE={test_image} " not in dry[-2]:
        # The tree changed since the image was built: the real run would build first (minutes).
        pytest.skip(f"this checkout's content tag is not the tested image {test_image}")
    assert len(dry) == 2 and "-m pytest" in dry[0] and " run --rm " in dry[1]
    real = invoke_unrecorded(*task, *pytest_args, env={**env, processes.RECORD_ENV: str(record)})
    assert real.returncode == 0, real.stdout[-2000:] + real.stderr
    same_lines(record, dry)
    assert f"xpukit-test-{os.getuid()}" in dry[1] and Path(tmp_path / "tmp").is_dir()


@pytest.mark.docker
def test_a_dry_run_prints_the_build_a_real_run_would_start_with(docker_client):
    """Where the engine lacks the image (and the lock shares none of this content), a real run
    builds it first: its dry run prints that build before the run line."""
    env = {"XPUKIT_IMAGE": "xpukit-never-built", "XPUKIT_ENGINE": "docker"}
    dry = commands_printed(
        invoke_unrecorded("demo-ur", "--where", "container", "--profile", "cpu", "--dry-run", env=env)
    )
    assert len(dry) == 2, dry
    build_line, run_line = dry
    assert " build " in build_line and "-t xpukit-never-built:cpu-" in build_line
    assert " run --rm " in run_line and run_line.split(" xpukit-never-built:cpu-")[1].split()[0] in build_line
    assert not docker_client.images.list(name="xpukit-never-built")  # a dry run built nothing


@pytest.mark.docker
def test_one_sdk_client_per_task_opened_once_and_closed_once(docker_client, monkeypatch, capsys):
    """The task's engine owns its client: a doctor run (engine probe, builder probe, image probe)
    and a demo dry run (where auto, the plan, the base) each open one client and close it once.
    Before, the doctor opened three and closed none."""
    import docker

    from xpukit.host.commands import kit as commands

    opened: list[object] = []
    closed: list[object] = []

    class Counting(docker.DockerClient):
        def __init__(self, *args, **kwargs):
            opened.append(self)
            super().__init__(*args, **kwargs)

        def close(self):
            closed.append(self)
            super().close()

    monkeypatch.setattr(docker, "DockerClient", Counting)
    environ = {**os.environ, "XPUKIT_ENGINE": "docker", "XPUKIT_PROFILE": "cpu", "XPUKIT_CA_BUNDLE": "none"}
    for dry_run, run in ((False, commands.doctor_cmd), (True, lambda ctx: commands.demo_ur(ctx, "auto", []))):
        opened.clear()
        closed.clear()
        ctx = settings.make_context({"dry_run": dry_run}, None, environ)
        run(ctx)
        assert len(opened) == 1 and closed == opened, (len(opened), len(closed))
    capsys.readouterr()
