"""Base digests for real: a registry started here serves the local base; locking fills its digest
into a pins file, the build's pull takes exactly that digest, and a tag that moved afterwards is
refused with one line."""

from __future__ import annotations

import contextlib
import io

import pytest

from tests.support.services import registry
from xpukit.errors import XpukitError
from xpukit.host.image import build
from xpukit.host.versions import lock, pins
from xpukit.layout import REPO_ROOT

pytestmark = pytest.mark.docker
USERS = {"ci": "pw-for-tests"}
AUTH = {"username": "ci", "password": USERS["ci"]}
BASE = "xpukit-base:bookworm-slim"


def _push(sdk, source: str, repository: str, tag: str) -> str:
    sdk.images.get(source).tag(repository, tag)
    for line in sdk.api.push(repository, tag=tag, stream=True, decode=True, auth_config=AUTH):
        assert "error" not in line, line
    return sdk.images.get_registry_data(f"{repository}:{tag}", auth_config=AUTH).id


def test_lock_fills_the_digest_builds_pull_it_and_a_moved_tag_is_refused(docker_client, tmp_path):
    try:
        docker_client.images.get(BASE)
    except Exception:
        pytest.skip("needs the local base image (invoke base)")
    with registry(tmp_path / "registry", USERS) as address:
        repository = f"{address}/library/debian"
        pushed = _push(docker_client, BASE, repository, "bookworm-slim")
        text = (REPO_ROOT / "env" / "pins.toml").read_text().replace('image = "debian"', f'image = "{repository}"', 1)
        pins_file = tmp_path / "pins.toml"
        pins_file.write_text(text)
        profile = pins.load(pins_file).profile("cpu")
        registry_data = lambda ref: docker_client.images.get_registry_data(ref, auth_config=AUTH).id  # noqa: E731
        digest = lock.resolve_digest(profile.base_name, registry_data)
        assert digest == pushed
        lock.fill_digests(pins_file, {"cpu": digest})
        profile = pins.load(pins_file).profile("cpu")
        assert profile.base_reference == f"{repository}:bookworm-slim@{pushed}"
        lock.check_base_not_moved(profile, registry_data)  # unchanged: fine

        docker_client.images.remove(f"{repository}:bookworm-slim", noprune=True)
        docker_client.api.auth_config = AUTH
        docker_client.login(username="ci", password=USERS["ci"], registry=address)
        said: list[str] = []
        assert build.pull_with_progress(docker_client, profile.base_reference, said.append), said
        assert f"{repository}@{pushed}" in docker_client.images.get(f"{repository}@{pushed}").attrs["RepoDigests"]
        # The lock records a base by content: the digest it was pulled by, the image ID of a local one.
        assert lock.base_content_id(docker_client, profile.base_reference) == pushed
        assert lock.base_content_id(docker_client, BASE) == docker_client.images.get(BASE).id
        assert lock.base_content_id(docker_client, "xpukit-no-such-base:none") == ""

        # Upstream moves the tag to other content: the locked pins are refused, in one line.
        moved, _ = docker_client.images.build(
            fileobj=io.BytesIO(f"FROM {BASE}\nLABEL io.xpukit.test=moved\n".encode()), rm=True
        )
        other = _push(docker_client, moved.id, repository, "bookworm-slim")
        assert other != pushed
        with pytest.raises(XpukitError, match="moved since it was locked") as info:
            lock.check_base_not_moved(profile, registry_data)
        assert "\n" not in info.value.one_line()
        for ref in (f"{repository}:bookworm-slim", f"{repository}@{pushed}", moved.id):
            with contextlib.suppress(Exception):  # already gone
                docker_client.images.remove(ref, noprune=True)


@pytest.mark.unit
def test_a_base_of_other_content_is_one_line_and_the_lock_keeps_its_id(tmp_path):
    from xpukit.host.image import registry as reg

    assert lock.base_difference(BASE, "sha256:" + "a" * 64, "sha256:" + "a" * 64) == ""
    assert lock.base_difference(BASE, "", "sha256:" + "a" * 64) == ""  # an older lock without base_id
    note = lock.base_difference(BASE, "sha256:" + "a" * 64, "sha256:" + "b" * 64)
    assert "\n" not in note and note.startswith(f"base {BASE} here is sha256:bbbbbbbbbbbb")
    assert "built FROM sha256:aaaaaaaaaaaa" in note and "no shared layer will match" in note
    where = reg.Registry.parse("127.0.0.1:5000/team")
    entry = reg.lock_entry(where, "cpu-abc", "sha256:" + "c" * 64, "pins", BASE, "sha256:" + "a" * 64)
    path = tmp_path / "images.toml"
    reg.write_lock(path, {"cpu": entry})
    assert reg.read_lock(path)["cpu"].base_id == "sha256:" + "a" * 64
    older = reg.lock_entry(where, "cpu-abc", "sha256:" + "c" * 64, "pins", BASE)
    reg.write_lock(path, {"cpu": older})
    assert "base_id" not in path.read_text() and reg.read_lock(path) == {"cpu": older}
