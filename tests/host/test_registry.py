"""Sharing the image by digest, against a real registry (Debian's docker-registry with htpasswd.

The tests that run on the host, with no engine; the others are in tests/engine/test_registry.py.
"""

from __future__ import annotations

import pytest

from xpukit.host.share import registry as reg


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "host", "namespace"),
    [
        ("127.0.0.1:5000/team", "127.0.0.1:5000", "team"),
        ("registry.example.com/xpukit/ci", "registry.example.com", "xpukit/ci"),
        ("localhost:5000", "localhost:5000", ""),
    ],
)
def test_registry_parses(text, host, namespace):
    r = reg.Registry.parse(text)
    assert (r.host, r.namespace) == (host, namespace)
    assert r.repository() == "/".join(p for p in (host, namespace, "xpukit") if p)


@pytest.mark.unit
@pytest.mark.parametrize("text", ["team", "http://127.0.0.1:5000/team", "127.0.0.1:5000/Team", ""])
def test_bad_registry_is_one_line(text):
    with pytest.raises(reg.RegistryError, match="is not HOST\\[:PORT\\]/NAMESPACE") as info:
        reg.Registry.parse(text)
    assert "\n" not in info.value.one_line()


@pytest.mark.unit
def test_credentials_come_from_a_file(tmp_path):
    assert reg.credentials({}) is None
    secret = tmp_path / "pw"
    secret.write_text("s3cret\n")
    assert reg.credentials({"XPUKIT_REGISTRY_USER": "alice", "XPUKIT_REGISTRY_PASSWORD_FILE": str(secret)}) == {
        "username": "alice",
        "password": "s3cret",
    }
    with pytest.raises(reg.RegistryError, match="go together"):
        reg.credentials({"XPUKIT_REGISTRY_USER": "alice"})
    with pytest.raises(reg.RegistryError, match="cannot read") as info:
        reg.credentials({"XPUKIT_REGISTRY_USER": "alice", "XPUKIT_REGISTRY_PASSWORD_FILE": str(tmp_path / "nope")})
    assert "s3cret" not in info.value.one_line()


@pytest.mark.unit
def test_lock_round_trip_and_strict_reading(tmp_path):
    path = tmp_path / "images.toml"
    assert reg.read_lock(path) == {}
    entry = reg.lock_entry(reg.Registry.parse("127.0.0.1:5000/team"), "cpu-abc", "sha256:" + "a" * 64, "f" * 12)
    reg.write_lock(path, {"cpu": entry})
    assert reg.read_lock(path) == {"cpu": entry}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "no temporary file left behind"
    path.write_text(path.read_text().replace("sha256:" + "a" * 64, "sha256:1234"))
    with pytest.raises(reg.RegistryError, match="is not sha256:<64 hex>"):
        reg.read_lock(path)
    path.write_text("[cpu]\ntag = 1\n")
    with pytest.raises(reg.RegistryError, match="exactly the string keys"):
        reg.read_lock(path)
    path.write_text("[cpu\n")
    with pytest.raises(reg.RegistryError, match="not readable TOML"):
        reg.read_lock(path)
