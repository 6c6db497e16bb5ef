"""Sharing the image by digest, against a real registry (Debian's docker-registry with htpasswd.

The tests that run on the host, with no engine; the others are in tests/engine/test_registry.py.
"""

from __future__ import annotations

import dataclasses

import pytest

from xpukit.host.image import registry as reg


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
    read = reg.read_lock(path)["cpu"]  # one typed value: the callers read its fields, never a dict's keys
    assert isinstance(read, reg.LockedImage) and read.reference == "127.0.0.1:5000/team/xpukit@sha256:" + "a" * 64
    assert (
        read.same_content("xpukit:cpu-abc") and read.same_content("cpu-abc") and not read.same_content("xpukit:cpu-b")
    )
    assert read.base_id == "" and "base_id" not in path.read_text()  # unknown stays empty, written as absent
    with pytest.raises(dataclasses.FrozenInstanceError):
        read.digest = "sha256:" + "b" * 64  # type: ignore[misc]
    path.write_text(path.read_text().replace("sha256:" + "a" * 64, "sha256:1234"))
    with pytest.raises(reg.RegistryError, match="is not sha256:<64 hex>"):
        reg.read_lock(path)
    path.write_text("[cpu]\ntag = 1\n")
    with pytest.raises(reg.RegistryError, match="exactly the string keys"):
        reg.read_lock(path)
    path.write_text("[cpu\n")
    with pytest.raises(reg.RegistryError, match="not readable TOML"):
        reg.read_lock(path)


@pytest.mark.unit
def test_lock_image_entry_has_one_reader_with_one_policy(tmp_path, monkeypatch):
    """locked_image/record_image are the only ways into env/lock/images.toml: no other module reads or
    writes it, a broken lock is an error through locked_image, and the image plan reads it once (its
    ``locked`` field, which the shared base, the base check and the dry run's build line take)."""
    import ast

    from xpukit.layout import REPO_ROOT

    direct = []
    for path in sorted((REPO_ROOT / "xpukit").rglob("*.py")):
        if path.name == "registry.py" and path.parent.name == "image":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("read_lock", "write_lock"):
                direct.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}: {node.attr}")
    assert not direct, "read the lock through registry.locked_image/record_image:\n" + "\n".join(direct)

    lock = tmp_path / "images.toml"
    entry = reg.lock_entry(reg.Registry.parse("127.0.0.1:5000/team"), "cpu-abc", "sha256:" + "a" * 64, "f" * 12, "b:1")
    assert reg.record_image("cpu", entry, lock) == lock
    assert reg.locked_image("cpu", lock) == entry and reg.locked_image("xpu", lock) is None
    monkeypatch.setattr(reg, "LOCK_PATH", lock)
    assert reg.locked_image("cpu") == entry
    plan_source = (REPO_ROOT / "xpukit" / "host" / "image" / "plan.py").read_text(encoding="utf-8")
    assert plan_source.count("locked_image(") == 1, "the image plan reads the lock once, into ImagePlan.locked"
    lock.write_text("[cpu\n")
    with pytest.raises(reg.RegistryError, match=r"images.toml is not readable TOML .*restore it from git"):
        reg.locked_image("cpu")
