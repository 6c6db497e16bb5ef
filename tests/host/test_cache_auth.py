"""Who may write the kernel caches, without a Redis or a device: the authenticator, the key and
password files, the URL, the program cache folder's own key, and how the tasks hand the host's
shared-cache settings to their containers (the exact `docker run` lines of their dry runs)."""

from __future__ import annotations

import json
import multiprocessing
import os
import shlex
import stat
from pathlib import Path

import pytest

from tests.support.invoke import invoke
from tests.support.services import unsealed
from xpukit.host.run import shared_cache
from xpukit.runtime import cache_auth
from xpukit.runtime.cache_auth import AuthFailure, KernelCacheConfigError, MacKey

pytestmark = pytest.mark.unit

KEY = MacKey(bytes(range(32)))


def secret(path: Path, data: bytes, mode: int = 0o600) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(mode)
    return path


# ---------------------------------------------------------------- the authenticator


def test_a_sealed_value_opens_under_its_name_only():
    value = KEY.seal("triton:ABC:k.spv", b"payload")
    assert KEY.open("triton:ABC:k.spv", value) == b"payload"
    with pytest.raises(AuthFailure, match="does not match"):  # another entry's copy (replay)
        KEY.open("triton:XYZ:k.spv", value)
    with pytest.raises(AuthFailure, match="does not match"):  # content changed, tag kept
        KEY.open("triton:ABC:k.spv", value[:-1] + b"X")
    with pytest.raises(AuthFailure, match="another key"):
        KEY.open("triton:ABC:k.spv", MacKey(b"k" * 32).seal("triton:ABC:k.spv", b"payload"))
    with pytest.raises(AuthFailure, match="no authenticator"):
        KEY.open("triton:ABC:k.spv", b"payload")
    with pytest.raises(AuthFailure, match="no authenticator"):
        KEY.open("triton:ABC:k.spv", value[:20])
    # A different domain (the program cache against the shared cache) is another message too.
    assert KEY.tag("program-cache", "n", b"p") != KEY.tag("kernel-cache", "n", b"p")
    assert unsealed(value) == b"payload" and unsealed(b"raw") == b"raw"


def test_the_key_id_names_the_key_without_revealing_it():
    assert len(KEY.key_id) == 16 and KEY.key_id != MacKey(bytes(32)).key_id
    assert bytes(range(32)).hex()[:16] not in KEY.key_id and "secret" not in repr(KEY)


# ---------------------------------------------------------------- secret files


@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_a_private_key_file_is_read(tmp_path, mode):
    path = secret(tmp_path / "key", os.urandom(32), mode)
    key = cache_auth.configured_key({"XPUKIT_KERNEL_CACHE_KEY_FILE": str(path)})
    assert key is not None and key.secret == path.read_bytes()


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660])
def test_a_key_file_others_can_read_is_refused_naming_chmod(tmp_path, mode):
    path = secret(tmp_path / "key", os.urandom(32), mode)
    with pytest.raises(KernelCacheConfigError) as info:
        cache_auth.configured_key({"XPUKIT_KERNEL_CACHE_KEY_FILE": str(path)})
    line = info.value.one_line()
    assert f"chmod 600 {path}" in line and f"{mode:04o}" in line and "\n" not in line


def test_key_file_problems_are_one_line_each(tmp_path):
    env = "XPUKIT_KERNEL_CACHE_KEY_FILE"
    cases = {
        str(tmp_path / "missing"): "cannot read",
        str(secret(tmp_path / "short", b"0123456789")): "head -c 32 /dev/urandom",
        str(tmp_path): "not a regular file",
    }
    for path, expected in cases.items():
        with pytest.raises(KernelCacheConfigError) as info:
            cache_auth.configured_key({env: path})
        assert expected in info.value.one_line() and "\n" not in info.value.one_line(), path
    assert cache_auth.configured_key({}) is None and cache_auth.configured_key({env: " "}) is None


def test_the_password_file_is_checked_like_the_key_and_loses_one_newline(tmp_path):
    env = "XPUKIT_KERNEL_CACHE_PASSWORD_FILE"
    assert cache_auth.configured_password({env: str(secret(tmp_path / "pw", b"p@ss word\n"))}) == "p@ss word"
    with pytest.raises(KernelCacheConfigError, match="chmod 600"):
        cache_auth.configured_password({env: str(secret(tmp_path / "pw2", b"pw\n", 0o644))})


# ---------------------------------------------------------------- the URL


@pytest.mark.parametrize(
    ("url", "tls", "host", "port", "db", "user", "loopback"),
    [
        ("redis://127.0.0.1:6400", False, "127.0.0.1", 6400, 0, None, True),
        ("rediss://localhost/3", True, "localhost", 6379, 3, None, True),
        ("redis://[::1]:7000", False, "::1", 7000, 0, None, True),
        ("redis://127.0.0.2:7000", False, "127.0.0.2", 7000, 0, None, True),
        ("rediss://ci@cache.example.com:6380/1", True, "cache.example.com", 6380, 1, "ci", False),
        ("redis://10.0.0.5", False, "10.0.0.5", 6379, 0, None, False),
    ],
)
def test_urls(url, tls, host, port, db, user, loopback):
    target = cache_auth.parse_url(url)
    assert (target.tls, target.host, target.port, target.db, target.username, target.loopback) == (
        tls,
        host,
        port,
        db,
        user,
        loopback,
    )


# ---------------------------------------------------------------- the program cache folder's key


def _make_key(folder: str) -> bytes:
    return cache_auth.local_key(Path(folder)).secret


def test_a_folder_key_is_made_once_private_and_kept(tmp_path):
    folder = tmp_path / "programs"
    first = cache_auth.local_key(folder)
    path = folder / cache_auth.LOCAL_KEY_NAME
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(first.secret) == 32
    assert cache_auth.local_key(folder) == first
    assert [p.name for p in folder.iterdir()] == [cache_auth.LOCAL_KEY_NAME]  # no temporary file left


def test_processes_making_a_folder_key_at_once_agree_on_one(tmp_path):
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        keys = pool.map(_make_key, [str(tmp_path / "programs")] * 8)
    assert len(set(keys)) == 1


def test_a_folder_key_others_can_read_is_refused(tmp_path):
    folder = tmp_path / "programs"
    cache_auth.local_key(folder)
    (folder / cache_auth.LOCAL_KEY_NAME).chmod(0o644)
    with pytest.raises(KernelCacheConfigError, match="chmod 600"):
        cache_auth.local_key(folder)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file of another user needs root")
def test_a_folder_key_of_another_user_is_refused(tmp_path):
    folder = tmp_path / "programs"
    cache_auth.local_key(folder)
    os.chown(folder / cache_auth.LOCAL_KEY_NAME, 12345, 12345)
    with pytest.raises(KernelCacheConfigError, match="not a file of this user"):
        cache_auth.local_key(folder)


# ---------------------------------------------------------------- into the tasks' containers


def team_env(tmp_path: Path, url: str = "redis://127.0.0.1:6390", **extra: str) -> dict[str, str]:
    return {
        "HOME": str(tmp_path / "home"),
        "XPUKIT_KERNEL_CACHE": url,
        "XPUKIT_KERNEL_CACHE_KEY_FILE": str(secret(tmp_path / "team" / "key", os.urandom(32))),
        "XPUKIT_KERNEL_CACHE_PASSWORD_FILE": str(secret(tmp_path / "team" / "pw", b"sesame-1234\n")),
        **extra,
    }


def test_forwarding_mounts_readable_copies_read_only_and_uses_the_hosts_network(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    env = team_env(tmp_path, "rediss://localhost:6390", XPUKIT_KERNEL_CACHE_CA_FILE=str(ca))
    found = shared_cache.forwarding(env)
    assert found is not None and found.network_mode == "host" and found.notes == []
    inside = cache_auth.CONTAINER_SECRETS
    assert found.environment == {
        "XPUKIT_KERNEL_CACHE": "rediss://localhost:6390",
        "XPUKIT_KERNEL_CACHE_KEY_FILE": f"{inside}/kernel-cache.key",
        "XPUKIT_KERNEL_CACHE_PASSWORD_FILE": f"{inside}/kernel-cache.password",
        "XPUKIT_KERNEL_CACHE_CA_FILE": f"{inside}/kernel-cache-ca.pem",
    }
    folder = shared_cache.secrets_folder(env)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700  # the copies are this user's alone on the host
    originals = {"kernel-cache.key": env["XPUKIT_KERNEL_CACHE_KEY_FILE"], "kernel-cache.password": env[
        "XPUKIT_KERNEL_CACHE_PASSWORD_FILE"], "kernel-cache-ca.pem": str(ca)}  # fmt: skip
    assert set(found.volumes) == {str(folder / name) for name in originals}
    for name, original in originals.items():
        copy = folder / name
        assert found.volumes[str(copy)] == {"bind": f"{inside}/{name}", "mode": "ro"}
        assert copy.read_bytes() == Path(original).read_bytes()
        assert stat.S_IMODE(copy.stat().st_mode) == 0o444  # the image's user reads it, whatever its uid
    flags = found.cli_flags()
    assert flags[:2] == ["--network", "host"] and f"{folder}/kernel-cache.key:{inside}/kernel-cache.key:ro" in flags
    assert not any("sesame" in f for f in flags)


def test_forwarding_leaves_a_remote_cache_on_the_default_network(tmp_path):
    found = shared_cache.forwarding(team_env(tmp_path, "redis://cache.example.com:6379"))
    assert found is not None and found.network_mode is None
    assert shared_cache.forwarding({"HOME": str(tmp_path)}) is None


def test_forwarding_says_when_a_remote_engine_cannot_reach_this_hosts_loopback(tmp_path):
    found = shared_cache.forwarding(team_env(tmp_path), engine_api="tcp://builder.example.com:2375")
    assert found is not None and len(found.notes) == 1 and "loopback" in found.notes[0]


def test_forwarding_in_a_dry_run_writes_nothing(tmp_path):
    env = team_env(tmp_path)
    found = shared_cache.forwarding(env, write=False)
    assert found is not None and found.volumes and not shared_cache.secrets_folder(env).exists()


def test_forwarding_refuses_what_the_runtime_would_refuse(tmp_path):
    env = team_env(tmp_path)
    Path(env["XPUKIT_KERNEL_CACHE_KEY_FILE"]).chmod(0o644)
    with pytest.raises(KernelCacheConfigError, match="chmod 600"):
        shared_cache.forwarding(env)
    with pytest.raises(KernelCacheConfigError, match="carries a password"):
        shared_cache.forwarding({**team_env(tmp_path), "XPUKIT_KERNEL_CACHE": "redis://:pw@127.0.0.1"})


def _run_line(stdout: str) -> list[str]:
    return shlex.split([ln for ln in stdout.splitlines() if " run " in ln][-1])


@pytest.mark.parametrize(
    "task",
    [
        ["compile", "examples/kernels.py:scale_kernel", "--where", "container", "--profile", "cpu"],
        ["kernel-report", "examples/kernels.py:scale_kernel", "--where", "container", "--profile", "cpu"],
        ["demo-ur", "--where", "container", "--profile", "cpu"],
        ["test", "--where", "container", "--phase", "container", "--profile", "cpu"],
        ["shell", "--profile", "cpu"],
    ],
    ids=lambda task: task[0],
)
def test_every_task_container_gets_the_hosts_shared_cache(tmp_path, task):
    env = team_env(tmp_path)
    extra = ["--out", str(tmp_path / "out")] if task[0] == "compile" else []
    result = invoke(*task, *extra, "--dry-run", env=env)
    assert result.returncode == 0, result.stderr
    line = _run_line(result.stdout)
    folder = shared_cache.secrets_folder(env)
    inside = cache_auth.CONTAINER_SECRETS
    assert line[line.index("--network") + 1] == "host"
    assert f"{folder}/kernel-cache.key:{inside}/kernel-cache.key:ro" in line
    assert f"{folder}/kernel-cache.password:{inside}/kernel-cache.password:ro" in line
    assert "XPUKIT_KERNEL_CACHE=redis://127.0.0.1:6390" in line
    assert f"XPUKIT_KERNEL_CACHE_KEY_FILE={inside}/kernel-cache.key" in line
    assert "sesame" not in result.stdout + result.stderr
    assert not folder.exists()  # a dry run copies nothing


def test_a_task_with_a_key_file_others_can_read_stops_in_one_line(tmp_path):
    env = team_env(tmp_path)
    Path(env["XPUKIT_KERNEL_CACHE_KEY_FILE"]).chmod(0o640)
    result = invoke("demo-ur", "--where", "container", "--profile", "cpu", "--dry-run", env=env)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    errors = [ln for ln in result.stderr.splitlines() if "error:" in ln]
    assert len(errors) == 1 and f"chmod 600 {env['XPUKIT_KERNEL_CACHE_KEY_FILE']}" in errors[0], result.stderr


def test_the_devcontainer_gets_the_hosts_shared_cache(tmp_path):
    env = team_env(tmp_path)
    result = invoke("devcontainer", "--profile", "cpu", "--dry-run", env=env)
    assert result.returncode == 0, result.stderr
    content = json.loads("\n".join(ln for ln in result.stdout.splitlines() if not ln.startswith(("//", "xpukit:"))))
    folder, inside = shared_cache.secrets_folder(env), cache_auth.CONTAINER_SECRETS
    assert content["containerEnv"]["XPUKIT_KERNEL_CACHE_KEY_FILE"] == f"{inside}/kernel-cache.key"
    assert f"source={folder}/kernel-cache.key,target={inside}/kernel-cache.key,type=bind,readonly" in content["mounts"]
    assert content["runArgs"][-2:] == ["--network", "host"]
