"""Sharing the image by digest, against a real registry (Debian's docker-registry with htpasswd
users, started here on 127.0.0.1) and a second, empty Docker engine: push, the lock file, pull by
digest, and every fault the registry or network can raise."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.support.services import registry, second_engine
from xpukit.host.image import registry as reg

USERS = {"alice": "correct horse"}


# --- pure logic ----------------------------------------------------------------------------------


# --- against a real registry ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def live_registry(tmp_path_factory, docker_client):
    folder = tmp_path_factory.mktemp("registry")
    try:
        with registry(folder, USERS) as address:
            yield address
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # its blobs: not held through the modules after


@pytest.fixture(scope="module")
def small_image(docker_client) -> str:
    """The local base image (`invoke base`): small, and on every engine that built the kit."""
    for ref in ("xpukit-base:bookworm-slim",):
        try:
            docker_client.images.get(ref)
            return ref
        except Exception:
            continue
    pytest.skip("needs the local base image (invoke base)")


AUTH = {"username": "alice", "password": USERS["alice"]}


@pytest.mark.docker
def test_push_records_the_confirmed_digest_and_an_empty_engine_pulls_it(
    docker_client, live_registry, small_image, tmp_path
):
    r = reg.Registry.parse(f"{live_registry}/team")
    digest = reg.push(docker_client, small_image, r, "cpu-test", AUTH)
    docker_client.images.remove(f"{r.repository()}:cpu-test", noprune=True)  # the engine keeps only its own names
    assert reg.DIGEST_RE.match(digest)
    assert reg.remote_digest(docker_client, f"{r.repository()}:cpu-test", AUTH, str(r)) == digest
    lock = tmp_path / "images.toml"
    reg.write_lock(lock, {"cpu": reg.lock_entry(r, "cpu-test", digest, "pins")})
    entry = reg.read_lock(lock)["cpu"]

    import docker

    with second_engine(tmp_path / "engine-b") as host_b:
        b = docker.DockerClient(base_url=host_b, timeout=600)
        try:
            assert b.images.list() == []
            image = reg.pull(b, entry, AUTH)
            assert f"{entry.repository}@{digest}" in image.attrs["RepoDigests"]
            assert image.id == docker_client.images.get(small_image).id  # the very same image
        finally:
            b.close()


@pytest.mark.docker
def test_wrong_credentials_push_nothing(docker_client, live_registry, small_image):
    r = reg.Registry.parse(f"{live_registry}/team")
    with pytest.raises(reg.RegistryError, match="refused the credentials") as info:
        reg.push(docker_client, small_image, r, "cpu-badauth", {"username": "alice", "password": "wrong"})
    assert "wrong" not in info.value.one_line()
    assert not docker_client.images.list(name=f"{r.repository()}:cpu-badauth"), "no local tag for a failed push"
    assert reg.remote_digest(docker_client, f"{r.repository()}:cpu-badauth", AUTH, str(r)) is None


@pytest.mark.docker
def test_unreachable_registry(docker_client, small_image):
    from tests.support.services import free_port

    r = reg.Registry.parse(f"127.0.0.1:{free_port()}/team")
    with pytest.raises(reg.RegistryError, match="is unreachable"):
        reg.push(docker_client, small_image, r, "cpu-nowhere", AUTH)
    assert not docker_client.images.list(name=f"{r.repository()}:cpu-nowhere")


@pytest.mark.docker
def test_read_only_registry(docker_client, small_image, tmp_path):
    with registry(tmp_path / "ro", USERS, read_only=True) as address:
        r = reg.Registry.parse(f"{address}/team")
        with pytest.raises(reg.RegistryError, match="is read-only"):
            reg.push(docker_client, small_image, r, "cpu-ro", AUTH)


@pytest.mark.docker
def test_interrupted_push_leaves_the_lock_and_no_tag(docker_client, live_registry, small_image, tmp_path):
    """Ctrl-C during the upload: the lock keeps its old content, the remote-named tag is gone."""
    r = reg.Registry.parse(f"{live_registry}/interrupted")
    lock = tmp_path / "images.toml"
    old = {"cpu": reg.lock_entry(r, "cpu-old", "sha256:" + "b" * 64, "pins")}
    reg.write_lock(lock, old)
    before = lock.read_bytes()
    seen = []

    def interrupt(line):
        seen.append(line)
        if len(seen) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        digest = reg.push(docker_client, small_image, r, "cpu-new", AUTH, progress=interrupt)
        reg.write_lock(lock, {"cpu": reg.lock_entry(r, "cpu-new", digest, "pins")})  # never reached
    assert lock.read_bytes() == before
    assert not docker_client.images.list(name=f"{r.repository()}:cpu-new")


@pytest.mark.docker
def test_pull_of_a_digest_the_registry_does_not_have(docker_client, live_registry):
    r = reg.Registry.parse(f"{live_registry}/team")
    entry = reg.lock_entry(r, "cpu-x", "sha256:" + "c" * 64, "pins")
    with pytest.raises(reg.RegistryError, match="is not in registry"):
        reg.pull(docker_client, entry, AUTH)


@pytest.mark.docker
def test_missing_local_image(docker_client, live_registry):
    r = reg.Registry.parse(f"{live_registry}/team")
    with pytest.raises(reg.RegistryError, match="does not exist on this engine"):
        reg.push(docker_client, "xpukit:never-built-" + os.urandom(4).hex(), r, "t", AUTH)
