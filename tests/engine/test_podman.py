"""podman as the kit's engine, for real: `invoke base`, `build`, `demo-ur`, `test` and `export` with
XPUKIT_ENGINE=podman, and the CA bundle kept out of podman-built layers.

Everything runs in a podman store of its own (graphroot and runroot in a temporary folder, through
CONTAINERS_STORAGE_CONF), so the machine's podman images are never touched: the session's
`podman_kit` (tests/support/podman_kit.py, one cold build shared with tests/engine/test_verify.py).
The kit starts podman's API service itself for each task and stops it by pid; the tests check that
it did. Builds use XPUKIT_BUILD_NETWORK=host: rootful podman's bridge here gives RUN steps no route out.
Rootless podman needs subordinate id ranges (/etc/subuid) that CI machines lack: it is skipped
there, with the reason, and documented in docs/engines.md.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import uuid

import pytest

from tests.support.image_checks import needles_in_stream
from tests.support.podman_kit import REQUIRED, Kit, need_podman
from xpukit.host import engine
from xpukit.host import podman as podman_mod

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def kit(podman_kit: Kit) -> Kit:
    """The session's kit on its private podman store (tests/engine/conftest.py): base and one cold
    build, shared with tests/engine/test_verify.py."""
    return podman_kit


def test_podman_build_keeps_the_ca_bundle_out_of_every_layer(kit):
    """The bundle (a BuildKit-style secret to buildah) is in no layer, history line or label."""
    service = podman_mod.Service(need_podman(), lambda _m: None, kit.env)
    try:
        service.wait_ready(engine.answers_at)
        sdk = engine.client(service.endpoint)
        image = sdk.images.get(kit.tag)
        assert image.labels.get("io.xpukit.profile") == "cpu"
        needles = [kit.bundle.read_bytes(), kit.canary.encode()]
        assert not needles_in_stream(image.save(chunk_size=8 << 20), needles)
        for text in (json.dumps(sdk.api.history(kit.tag)), json.dumps(image.labels)):
            assert kit.canary not in text
        sdk.close()
    finally:
        service.stop()


def test_verify_finds_the_local_podman_build_bit_for_bit(kit, podman_kit_verified):
    """The user's path (docs/reproducible.md): `invoke build` on podman, then `invoke verify` with no
    --against. The fixture's build was cold at this commit, so verify takes the local image and its
    rebuild from nothing, in an empty store, must have the local image's ID (one more cold build)."""
    local_id = kit.podman("image", "inspect", "--format", "{{.Id}}", kit.tag).stdout.strip()
    result = podman_kit_verified
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-4000:]
    assert f"verify: comparing a rebuild from nothing with the local image {kit.tag}" in out, out[-3000:]
    reproducible = [ln for ln in result.stdout.splitlines() if ln.startswith("reproducible: ")]
    assert reproducible == [f"reproducible: sha256:{local_id.removeprefix('sha256:')}"], out[-3000:]


def test_podman_runs_the_ur_demo_exactly(kit):
    result = kit.invoke("demo-ur")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-1000:]
    assert result.stdout.count("max abs error 0 (exact)") == 2
    assert result.stdout.rstrip().endswith("OK")
    assert "is missing; building it" not in result.stdout  # the image built above, found by its tag


def test_podman_demo_uses_the_hosts_shared_kernel_cache(kit, tmp_path):
    """XPUKIT_KERNEL_CACHE with its key and password files, exported on the host, reaches podman's
    container too (host network, read-only copies the image's user can read): the first demo fills
    Redis, the second reads it."""
    from tests.support.services import redis_client, redis_names, redis_server

    key, password = tmp_path / "key", tmp_path / "pw"
    for path, data in ((key, os.urandom(32)), (password, b"podman-cache-pw\n")):
        path.write_bytes(data)
        path.chmod(0o600)
    with redis_server(tmp_path / "redis", password="podman-cache-pw") as port:
        env = {
            "XPUKIT_KERNEL_CACHE": f"redis://127.0.0.1:{port}",
            "XPUKIT_KERNEL_CACHE_KEY_FILE": str(key),
            "XPUKIT_KERNEL_CACHE_PASSWORD_FILE": str(password),
            "XPUKIT_KERNEL_CACHE_DEBUG": "1",
            "HOME": str(tmp_path / "home"),
        }
        # A fresh cache volume each time: a new machine, whose local caches are empty.
        runs = [kit.with_env({**env, "XPUKIT_CACHE_VOLUME": f"xpukit-cache-{uuid.uuid4().hex[:8]}"}).invoke(
            "demo-ur", "--", "--n", "4096") for _ in range(2)]  # fmt: skip
        for run in runs:
            assert run.returncode == 0 and run.stdout.rstrip().endswith("OK"), run.stdout[-2000:] + run.stderr[-1000:]
        with redis_client(port, "podman-cache-pw") as redis:
            assert redis_names(redis, "xpukit:k*")
        assert "kernel cache miss" in runs[0].stdout and "kernel cache hit" not in runs[0].stdout
        assert "kernel cache hit" in runs[1].stdout and "kernel cache miss" not in runs[1].stdout


def test_podman_runs_the_container_tests(kit):
    """`invoke test` on podman, in the podman-built image: the smoke tests (marker sharing_smoke).
    Every container test ran on Docker's image of the same inputs in the container phase; this
    proves podman's container setup (user, mounts, ulimits, results folder) runs them."""
    result = kit.invoke("test", "--phase", "container", "--suite", "smoke")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-1000:]
    passed, failed = map(int, re.search(r"xpukit: (\d+) passed, (\d+) failed", result.stdout).groups())
    assert failed == 0 and passed >= 10


def test_podman_cache_mounts_keep_the_wheelhouse(kit):
    """Cache mounts survive between podman builds: a rebuild with no layer cache finds every
    locked wheel in the wheelhouse mount and downloads none."""
    dry = kit.invoke("build", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    command = shlex.split([ln for ln in dry.stdout.splitlines() if " build " in ln][-1])
    assert command[0].endswith("podman") and "--layers" in command and "--progress" not in command
    tag = f"xpukit-test:pod-{uuid.uuid4().hex[:8]}"
    command = [*command[:-1], "--no-cache", "-t", tag, command[-1]]
    result = subprocess.run(command, env=kit.env, capture_output=True, text=True, timeout=1800, check=False)
    try:
        log = result.stdout + result.stderr
        assert result.returncode == 0, log[-3000:]
        assert "install-python.sh" in log  # the step with the wheelhouse mount ran again
        assert "the wheelhouse lacks some locked wheels" not in log
    finally:
        kit.podman("rmi", "-f", tag)


def test_podman_exports_an_oci_archive_from_its_store(kit, tmp_path):
    if shutil.which("skopeo") is None:
        why = "needs skopeo (apt-get install skopeo)"
        pytest.fail(f"XPUKIT_REQUIRE_PODMAN=1 but {why}") if REQUIRED else pytest.skip(why)
    out = tmp_path / "xpukit.oci.tar"
    result = kit.invoke("export", "--format", "oci-archive", str(out))
    assert result.returncode == 0, result.stdout[-1500:] + result.stderr[-1500:]
    info = json.loads(out.with_name(out.name + ".json").read_text())
    read_back = subprocess.run(
        ["skopeo", "inspect", "--format", "{{.Digest}}", f"oci-archive:{out}"], capture_output=True, text=True
    )
    assert read_back.stdout.strip() == info["oci_manifest_digest"] != ""


def test_auto_picks_podman_only_where_docker_does_not_answer(kit):
    """Without DOCKER_HOST, `auto` takes Docker's socket when it answers, else podman."""
    env = {**kit.env, "XPUKIT_ENGINE": "auto"}
    result = subprocess.run(
        [sys.executable, "-m", "invoke", "build", "--dry-run"],
        cwd=kit.tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    docker_answers = engine.answers_at(engine.DOCKER_DEFAULT_SOCKET)
    line = [ln for ln in result.stdout.splitlines() if " build " in ln][-1]
    if docker_answers:
        assert "engine auto -> podman" not in result.stdout and "podman build" not in line
    else:
        assert "engine auto -> podman (no Docker engine answers and podman is installed)" in result.stdout
        assert line.split()[0].endswith("podman")


@pytest.mark.unit
def test_container_ulimits_are_the_service_processes_own(tmp_path):
    """The limits read from /proc/PID/limits: a written file for the format, then this process."""
    fake = tmp_path / "42"
    fake.mkdir()
    (fake / "limits").write_text(
        "Limit                     Soft Limit           Hard Limit           Units     \n"
        "Max processes             32768                32768                processes \n"
        "Max open files            1024                 20000                files     \n"
        "Max locked memory         unlimited            unlimited            bytes     \n"
    )
    assert podman_mod.process_ulimits(42, str(tmp_path)) == [
        {"name": "nproc", "soft": 32768, "hard": 32768},
        {"name": "nofile", "soft": 1024, "hard": 20000},
    ]
    import resource

    own = {u["name"]: (u["soft"], u["hard"]) for u in podman_mod.process_ulimits(os.getpid())}
    assert own["nofile"] == resource.getrlimit(resource.RLIMIT_NOFILE)


def test_docker_host_naming_podmans_socket_is_podman(kit):
    """A DOCKER_HOST that points at podman's API is recognised as podman (its version says so)."""
    service = podman_mod.Service(need_podman(), lambda _m: None, kit.env)
    try:
        service.wait_ready(engine.answers_at)
        found = engine.resolve_engine("auto", service.endpoint, say=lambda _m: None)
        assert (found.kind, found.api) == ("podman", service.endpoint)
        assert engine.resolve_engine("docker", service.endpoint).kind == "docker"  # an explicit choice wins
    finally:
        service.stop()
