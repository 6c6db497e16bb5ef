"""Bit-for-bit reproducible builds: `invoke verify` and the parts it is made of.

The tests that run against a container engine; the others are in tests/host/test_verify.py.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.podman_kit import unmount_under
from tests.support.verify import checkout_copy
from xpukit import layout
from xpukit.errors import XpukitError
from xpukit.host import engine
from xpukit.host.image import build
from xpukit.host.image import registry as registry_mod
from xpukit.host.versions import pins

ROOT = layout.REPO_ROOT


REQUIRED = os.environ.get("XPUKIT_REQUIRE_PODMAN") == "1"


def _need_podman_and_base() -> None:
    why = ""
    if shutil.which("podman") is None:
        why = "podman is not installed (apt-get install podman)"
    elif os.geteuid() != 0:
        why = "verify's empty stores use rootful podman here; rootless needs /etc/subuid ranges"
    else:
        try:
            sdk = engine.client(os.environ.get("DOCKER_HOST", engine.DOCKER_DEFAULT_SOCKET), timeout=10)
            if not engine.image_exists(sdk, build.local_base_name(pins.load().profile("cpu"))):
                why = "no local cpu base on the engine (invoke base)"
        except XpukitError as exc:
            why = f"no engine answers ({exc.one_line()})"
    if why:
        if REQUIRED:
            pytest.fail(f"XPUKIT_REQUIRE_PODMAN=1 but {why}")
        pytest.skip(why)


# Dockerfiles of the kit's shape (its base, a runtime stage), small, so that their two builds from
# nothing take seconds: the kit's own Dockerfile is built from nothing once per session on podman
# (tests/engine/conftest.py's podman_kit), rebuilt by `invoke verify` (tests/engine/test_podman.py)
# and rebuilt again by the lock test here.
STEADY_DOCKERFILE = """\
ARG BASE_IMAGE
FROM ${BASE_IMAGE} AS runtime
RUN mkdir -p /opt/xpukit && echo before > /opt/xpukit/before
RUN echo after > /opt/xpukit/after
"""
# Its middle step records the build time: the steps before and after it must give equal layers,
# that one must differ.
TIME_RECORDING_DOCKERFILE = """\
ARG BASE_IMAGE
FROM ${BASE_IMAGE} AS runtime
RUN mkdir -p /opt/xpukit && echo before > /opt/xpukit/before
RUN date +%s%N > /opt/xpukit/built-at
RUN echo after > /opt/xpukit/after
"""


def _verify_env(tree: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    full = {**os.environ, "PYTHONPATH": str(tree), "XPUKIT_BUILD_NETWORK": "host", "XPUKIT_PROFILE": "cpu"}
    for name in ("XPUKIT_ENGINE", "CONTAINERS_STORAGE_CONF", "SOURCE_DATE_EPOCH", "XPUKIT_BASE_IMAGE"):
        full.pop(name, None)
    for name in ("XPUKIT_REGISTRY", "XPUKIT_REGISTRY_USER", "XPUKIT_REGISTRY_PASSWORD_FILE"):
        full.pop(name, None)
    return {**full, **(env or {})}


def _verify(tree: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`invoke verify ARGS` in a checkout copy, on the machine's engine (its base is what the rebuild
    starts FROM)."""
    return subprocess.run(
        [sys.executable, "-m", "invoke", "verify", *args],
        cwd=tree,
        env=_verify_env(tree, env),
        capture_output=True,
        text=True,
        timeout=2400,
        check=False,
    )


def _reproducible(out: str) -> str:
    line = [ln for ln in out.splitlines() if ln.startswith("reproducible: ")]
    assert len(line) == 1 and len(line[0].split("sha256:")[1]) == 64, out[-3000:]
    return line[0].removeprefix("reproducible: ")


def _pushed(out: str) -> str:
    line = [ln for ln in out.splitlines() if ln.startswith("pushed with gzip: sha256:")]
    assert len(line) == 1, out[-3000:]
    return line[0].removeprefix("pushed with gzip: ")


@pytest.mark.docker
def test_two_cold_podman_builds_give_the_same_image_id(tmp_path):
    """`verify --against rebuild`: two builds from nothing in two empty podman stores, from the Docker
    engine's base, have one image ID; verify prints it and the second one's manifest digest pushed with
    gzip. (The kit's own Dockerfile: two more cold builds, compared by the test below and in
    tests/engine/test_podman.py.)"""
    _need_podman_and_base()
    result = _verify(checkout_copy(tmp_path / "tree", STEADY_DOCKERFILE), "--against", "rebuild")
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-4000:]
    assert "verify: rebuild: built in" in out and "verify: second rebuild: built in" in out
    _reproducible(result.stdout)
    _pushed(result.stdout)


@pytest.mark.docker
def test_against_lock_fetches_the_pushed_image_and_its_manifest_digest_is_the_rebuilds(
    podman_kit, podman_kit_verified, tmp_path
):
    """The session's cold podman build of the kit, pushed (podman push, its default gzip) to a real
    registry with a password, gets the manifest digest `invoke verify` printed for its own rebuild
    from nothing pushed with gzip (one build pushed, the other computed); recorded in a checkout
    copy's lock (never the committed one), `verify --against lock` fetches it with the registry
    credentials and finds a third build from nothing equal to it, and the registry serving that
    manifest digest."""
    from tests.support.services import registry

    first = podman_kit_verified
    assert first.returncode == 0, (first.stdout + first.stderr)[-3000:]
    image_id, gzip_digest = _reproducible(first.stdout), _pushed(first.stdout)
    tag = podman_kit.tag.rsplit(":", 1)[1]
    # A copy of the kit's checkout copy (same commit, time and content): its lock is written there.
    tree = Path(shutil.copytree(podman_kit.tree, tmp_path / "tree", symlinks=True))
    kit = podman_kit.with_env({"PYTHONPATH": str(tree)})
    password = tmp_path / "password"
    password.write_text("verify-pw\n")
    with registry(tmp_path / "registry", {"ci": "verify-pw"}) as address:
        repository = f"{address}/ci/xpukit"
        digest_file = tmp_path / "digest"
        pushed = kit.podman("push", "-q", "--tls-verify=false", "--creds", "ci:verify-pw",
                            "--digestfile", str(digest_file), podman_kit.tag, f"{repository}:{tag}")  # fmt: skip
        assert pushed.returncode == 0, pushed.stderr[-2000:]
        assert digest_file.read_text().strip() == gzip_digest  # one build pushed, the other computed
        lock = tree / "env" / "lock" / "images.toml"
        profile = pins.load().profile("cpu")
        entry = registry_mod.LockedImage(
            f"{address}/ci", repository, tag, gzip_digest, profile.fingerprint(), build.local_base_name(profile), ""
        )
        registry_mod.write_lock(lock, {"cpu": entry})
        creds = {"XPUKIT_REGISTRY_USER": "ci", "XPUKIT_REGISTRY_PASSWORD_FILE": str(password)}
        result = kit.with_env(creds).invoke("verify", "--against", "lock", timeout=2400, cwd=tree)
        out = result.stdout + result.stderr
        assert result.returncode == 0, out[-4000:]
        assert f"with the pushed image {repository}@{gzip_digest}" in out
        assert "was built from other inputs" not in out  # the copy's content tag is the kit's
        assert _reproducible(result.stdout) == image_id
        assert _pushed(result.stdout) == gzip_digest
        assert "the registry serves that manifest digest" in out
        denied = kit.invoke("verify", "--against", "lock", cwd=tree)  # no credentials: refused in one line
        assert denied.returncode == 1 and "fetching" in denied.stderr, denied.stderr[-2000:]
        assert "Traceback" not in denied.stderr and "building from nothing" not in denied.stdout + denied.stderr


@pytest.mark.docker
def test_a_build_that_records_its_time_fails_verify_naming_the_file(tmp_path):
    """Two builds from nothing of a Dockerfile whose one step writes the clock: verify fails,
    names that file, and finds only that step's layer different."""
    _need_podman_and_base()
    result = _verify(checkout_copy(tmp_path / "tree", TIME_RECORDING_DOCKERFILE), "--against", "rebuild")
    out = result.stdout + result.stderr
    assert result.returncode == 1, out[-4000:]
    assert "verify: NOT reproducible" in out
    differs = [ln for ln in out.splitlines() if "verify: layer" in ln and "differs" in ln]
    assert len(differs) == 1 and "built-at" in differs[0], out[-3000:]  # only that step's layer
    assert "/opt/xpukit/built-at: content" in out
    if shutil.which("diffoscope"):
        assert "diffoscope /opt/xpukit/built-at:" in out


@pytest.mark.docker
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_verify_stopped_in_its_first_build_step_leaves_nothing_behind(sig):
    """Stopped once its build runs a step (seconds in, no cold build), verify ends its podman, unmounts
    and removes its temporary stores, and exits 128 + the signal's number with one line."""
    _need_podman_and_base()
    proc = subprocess.Popen(
        [sys.executable, "-m", "invoke", "verify", "--against", "rebuild"],
        cwd=ROOT,
        env=_verify_env(ROOT),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        # SIGINT as a terminal gives it, also when pytest was started in the background by a shell
        # (which ignores SIGINT there, and an ignored signal stays ignored across exec).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    seen: list[str] = []
    folder = None
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            if not select.select([proc.stdout], [], [], 5)[0]:
                continue
            line = proc.stdout.readline()  # type: ignore[union-attr]
            seen.append(line)
            if folder is None and (
                found := re.search(r"building from nothing in (/var/tmp/xpukit-verify-[^/\s]+)", line)
            ):
                folder = Path(found.group(1))
            if folder is not None and re.search(r"STEP \d+/\d+: RUN ", line):
                time.sleep(2)  # in the step: its container and overlay mounts exist
                break
        assert folder is not None and proc.poll() is None, "".join(seen)[-3000:]
        assert any(str(folder) in m for m in Path("/proc/mounts").read_text().splitlines())  # mounts to remove
        proc.send_signal(sig)
        rest, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            if folder is not None:  # killed: its stores (GB, overlay mounts) are this test's to remove
                unmount_under(folder)
                shutil.rmtree(folder, ignore_errors=True)
    out = "".join(seen) + rest
    assert proc.returncode == 128 + sig, out[-3000:]
    stopped = [ln for ln in out.splitlines() if "verify stopped by" in ln]
    assert stopped == [f"xpukit: error: verify stopped by {sig.name}: removed its stores in {folder}"], out[-3000:]
    assert "Traceback" not in out
    assert not folder.exists()
    assert not [m for m in Path("/proc/mounts").read_text().splitlines() if str(folder) in m]
    left = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if str(folder).encode() in cmdline.read_bytes():
                left.append(cmdline.parent.name)
    assert not left, f"processes of the stopped verify still run: {left}"
