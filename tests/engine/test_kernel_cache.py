"""The shared kernel cache (XPUKIT_KERNEL_CACHE=redis://... or rediss://...) against real
redis-servers started here on 127.0.0.1 (one with ``requirepass``, one speaking TLS with a CA made
by openssl): containers of the kit's image, each with empty local caches, stand for machines. They
get their settings the way every task's container does (``xpukit.host.run.shared_cache.forwarding``:
the variables, read-only copies of the key and password files, the host's network).

What is proven: the second machine gets every kernel from Redis; entries forged in Redis (content
changed with its checksum updated, sealed with a wrong key, another kernel's entry replayed under
this one's name, or not sealed at all) are each rejected with one warning, rebuilt and never handed
to the device, while without a key the same forgeries are executed; Redis down, a wrong password or
a CA that does not match cost one warning; and `invoke compile` run twice hits the cache."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.devcontainer import CLI, run_cli
from tests.support.services import (
    TlsFiles,
    free_port,
    make_tls_certs,
    redis_client,
    redis_names,
    redis_server,
    unsealed,
)
from xpukit.host.run import shared_cache
from xpukit.layout import REPO_ROOT
from xpukit.runtime import cache_auth

if TYPE_CHECKING:
    import redis

PASSWORD = "team-cache-password-" + "x" * 8


def secret_file(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(0o600)
    return path


@dataclasses.dataclass
class Cache:
    """A Redis started for one test, and the host environment that points the kit at it."""

    port: int
    env: dict[str, str]
    password: str | None = None
    tls: TlsFiles | None = None
    key: cache_auth.MacKey | None = None

    @property
    def prefix(self) -> str:
        return "xpukit:" if self.key is None else f"xpukit:k{self.key.key_id}:"

    def client(self) -> redis.Redis:
        return redis_client(self.port, self.password, self.tls)


@contextlib.contextmanager
def shared_cache_server(
    tmp_path: Path, *, key: bool = True, password: bool = True, tls: bool = False
) -> Iterator[Cache]:
    files = make_tls_certs(tmp_path / "certs") if tls else None
    secret = os.urandom(32)
    with redis_server(tmp_path / "redis", PASSWORD if password else None, files) as port:
        env = {
            "HOME": str(tmp_path / "home"),  # the copies of the files go under it, not the user's
            "XPUKIT_KERNEL_CACHE": f"{'rediss' if tls else 'redis'}://127.0.0.1:{port}",
        }
        if key:
            env["XPUKIT_KERNEL_CACHE_KEY_FILE"] = str(secret_file(tmp_path / "team" / "cache.key", secret))
        if password:
            env["XPUKIT_KERNEL_CACHE_PASSWORD_FILE"] = str(
                secret_file(tmp_path / "team" / "redis.pw", PASSWORD.encode() + b"\n")
            )
        if files is not None:
            env["XPUKIT_KERNEL_CACHE_CA_FILE"] = str(files.ca)
        yield Cache(port, env, PASSWORD if password else None, files, cache_auth.MacKey(secret) if key else None)


def run_probe(docker_client, image: str, env: dict[str, str]) -> tuple[dict, str]:
    """tests/support/kernel_cache_probe.py in a fresh container, set up as a task's container would be."""
    forward = shared_cache.forwarding(env)
    assert forward is not None
    container = docker_client.containers.run(
        image,
        ["python", "/workspace/tests/support/kernel_cache_probe.py"],
        detach=True,
        network_mode=forward.network_mode,
        volumes={str(REPO_ROOT): {"bind": "/workspace", "mode": "ro"}, **forward.volumes},
        environment={
            "PYTHONPATH": "/workspace",
            "PYTHONDONTWRITEBYTECODE": "1",
            "TRITON_CACHE_DIR": "/tmp/triton",  # empty: a new machine
            "XPUKIT_CACHE_DIR": "/tmp/xpukit",
            **forward.environment,
        },
    )
    try:
        code = container.wait(timeout=600)["StatusCode"]
        out = container.logs(stdout=True, stderr=False).decode()
        err = container.logs(stdout=False, stderr=True).decode()
    finally:
        container.remove(force=True)
    assert code == 0, f"exit {code}: {err[-3000:]}"
    return json.loads(out.strip().splitlines()[-1]), err


def lines_with(err: str, *words: str) -> list[str]:
    return [ln for ln in err.splitlines() if all(w in ln for w in words)]


def triton_names(result: dict, label: str) -> str:
    """The store's name stem of a launch's Triton entry (Triton files its cache under base32 of the hash)."""
    stem = base64.b32encode(bytes.fromhex(result["triton_keys"][label])).decode().rstrip("=")
    return f"triton:{stem}:"


def reseal_with_old_tag(value: bytes, payload: bytes) -> bytes:
    """What a writer without the key can do: new content under the old authenticator."""
    header = len(value) - len(unsealed(value))
    return value[:header] + payload


def sealed_values_open(cache: Cache) -> None:
    """Every value under the key's prefix opens with the key, under its own name."""
    with cache.client() as redis:
        names = redis_names(redis, cache.prefix + "*")
        assert names
        for full in names:
            cache.key.open(full.removeprefix(cache.prefix), redis.get(full))


# ---------------------------------------------------------------- real Redis, containers as machines


@pytest.mark.docker
def test_second_machine_gets_every_kernel_through_a_password_and_a_key(docker_client, test_image, tmp_path):
    with shared_cache_server(tmp_path) as cache:
        first, err = run_probe(docker_client, test_image, cache.env)
        assert all(first["exact"].values()) and len(first["exact"]) == 6
        assert first["stores"] > 0 and first["hits"] == 0 and first["errors"] == first["rejected"] == 0
        assert lines_with(err, "no key") == []  # a key is configured: nothing to warn about
        second, _ = run_probe(docker_client, test_image, cache.env)
        assert all(second["exact"].values())
        assert second["misses"] == 0 and second["errors"] == second["rejected"] == 0
        assert second["hits"] > 0  # Triton compiled nothing: every kernel came from Redis
        assert first["program_cache"] == second["program_cache"] == "SharedProgramCache"
        assert first["program_builds"] == 6 and first["program_shared_hits"] == 0
        # The native binaries the first machine's driver built: loaded, not rebuilt, on the second.
        assert second["program_shared_hits"] == 6 and second["program_builds"] == 0
        # Everything in Redis is sealed with the team's key, under its prefix; nothing else is there.
        with cache.client() as redis:
            assert redis_names(redis) == redis_names(redis, cache.prefix + "*")
        sealed_values_open(cache)
        assert PASSWORD not in err


@pytest.mark.docker
def test_forged_replayed_and_foreign_entries_are_rejected_and_rebuilt(docker_client, test_image, tmp_path):
    """Five entries tampered with in Redis by someone without the key; a new machine rejects each
    with one warning, rebuilds it, computes every result exactly and never loads a forged binary."""
    with shared_cache_server(tmp_path) as cache:
        first, _ = run_probe(docker_client, test_image, cache.env)
        p = cache.prefix
        other_key = cache_auth.MacKey(os.urandom(32))
        with cache.client() as redis:
            get = lambda name: redis.get(p + name)  # noqa: E731

            # 1. scale/128: its SPIR-V replaced by scale/64's (valid SPIR-V, wrong block size), the
            #    group file's checksum updated to match, the old authenticators kept.
            group, spv = (
                triton_names(first, "scale/128") + f for f in ("__grp__scale_kernel.json", "scale_kernel.spv")
            )
            new_spv = unsealed(get(triton_names(first, "scale/64") + "scale_kernel.spv"))
            record = json.loads(unsealed(get(group)))
            record["xpukit_sha256"]["scale_kernel.spv"] = hashlib.sha256(new_spv).hexdigest()
            redis.set(p + spv, reseal_with_old_tag(get(spv), new_spv))
            redis.set(p + group, reseal_with_old_tag(get(group), json.dumps(record).encode()))
            # 2. add/128: add/64's entry, every file with its valid authenticator, replayed under add/128's names.
            for full in redis_names(redis, p + triton_names(first, "add/64") + "*"):
                name = full.removeprefix(p + triton_names(first, "add/64"))
                redis.set(p + triton_names(first, "add/128") + name, redis.get(full))
            # 3. scale/256: every file sealed again, with another key.
            for full in redis_names(redis, p + triton_names(first, "scale/256") + "*"):
                redis.set(full, other_key.seal(full.removeprefix(p), unsealed(redis.get(full))))
            # 4. add/256's native binary: bytes changed in the middle, the record's checksum updated.
            program = f"program:{first['program_keys']['add/256']}"
            raw, _, binary = unsealed(get(program)).partition(b"\n")
            middle = len(binary) // 2
            forged = binary[:middle] + bytes(b ^ 0xFF for b in binary[middle : middle + 64]) + binary[middle + 64 :]
            meta = {**json.loads(raw), "sha256": hashlib.sha256(forged).hexdigest(), "size": len(forged)}
            redis.set(p + program, reseal_with_old_tag(get(program), json.dumps(meta).encode() + b"\n" + forged))
            # 5. add/64's native binary as a writer without any key stores it: not sealed at all.
            unsealed_program = f"program:{first['program_keys']['add/64']}"
            redis.set(p + unsealed_program, unsealed(get(unsealed_program)))

        second, err = run_probe(docker_client, test_image, cache.env)
        assert second["exact"] == dict.fromkeys(first["exact"], True), second["exact"]
        rejected = lines_with(err, "shared kernel cache entry", "rejected")
        assert second["rejected"] == len(rejected) == 5, err[-3000:]
        assert any("another key" in ln for ln in rejected) and any("no authenticator" in ln for ln in rejected)
        assert sum("does not match" in ln for ln in rejected) == 3  # content changed (2) and the replay
        assert hashlib.sha256(forged).hexdigest() not in second["loaded"]["binary"]
        # Rebuilt: the two forged binaries, compiled again; the three Triton entries recompiled to the
        # same SPIR-V, whose (intact) native binaries came from Redis.
        assert second["program_builds"] == 2 and second["program_shared_hits"] == 4, second
        sealed_values_open(cache)  # the rebuilt entries replaced the forged ones
        third, err = run_probe(docker_client, test_image, cache.env)
        assert third["rejected"] == 0 and third["misses"] == 0 and lines_with(err, "rejected") == []


@pytest.mark.docker
def test_without_a_key_the_same_forgeries_are_executed(docker_client, test_image, tmp_path):
    """The control: with no key (entries checksummed only, as before), what the test above rejects
    runs, and the results are wrong. The process said so, once."""
    with shared_cache_server(tmp_path, key=False, password=False) as cache:
        first, err = run_probe(docker_client, test_image, cache.env)
        assert len(lines_with(err, "has no key")) == 1, err[-2000:]
        with cache.client() as redis:
            group, spv = (
                triton_names(first, "scale/128") + f for f in ("__grp__scale_kernel.json", "scale_kernel.spv")
            )
            new_spv = redis.get("xpukit:" + triton_names(first, "scale/64") + "scale_kernel.spv")
            record = json.loads(redis.get("xpukit:" + group))
            record["xpukit_sha256"]["scale_kernel.spv"] = hashlib.sha256(new_spv).hexdigest()
            redis.set("xpukit:" + spv, new_spv)
            redis.set("xpukit:" + group, json.dumps(record).encode())
            for full in redis_names(redis, "xpukit:" + triton_names(first, "add/64") + "*"):
                redis.set(full.replace(triton_names(first, "add/64"), triton_names(first, "add/128")), redis.get(full))
        second, err = run_probe(docker_client, test_image, cache.env)
        assert second["exact"]["scale/128"] is False and second["exact"]["add/128"] is False, second["exact"]
        assert second["rejected"] == 0 and len(lines_with(err, "has no key")) == 1


@pytest.mark.docker
def test_tls_with_a_ca_file_a_password_and_a_key(docker_client, test_image, tmp_path):
    with shared_cache_server(tmp_path, tls=True) as cache:
        first, err = run_probe(docker_client, test_image, cache.env)
        assert first["stores"] > 0 and first["errors"] == 0, err[-2000:]
        second, err = run_probe(docker_client, test_image, cache.env)
        assert all(second["exact"].values()) and second["misses"] == 0 and second["program_shared_hits"] == 6
        assert second["errors"] == second["rejected"] == 0 and PASSWORD not in err
        sealed_values_open(cache)
        # A CA that did not sign the server's certificate: one warning, the local cache, exact results.
        stranger = make_tls_certs(tmp_path / "stranger", name="someone-else")
        result, err = run_probe(
            docker_client, test_image, {**cache.env, "XPUKIT_KERNEL_CACHE_CA_FILE": str(stranger.ca)}
        )
        assert all(result["exact"].values()) and result["errors"] >= 1 and result["hits"] == 0
        assert len(lines_with(err, "kernel cache", "unavailable")) == 1, err[-2000:]
        assert "certificate verify failed" in err.lower() or "ssl" in err.lower()


@pytest.mark.docker
def test_a_wrong_password_is_one_warning(docker_client, test_image, tmp_path):
    with shared_cache_server(tmp_path) as cache:
        wrong = secret_file(tmp_path / "wrong.pw", b"not-the-password\n")
        result, err = run_probe(
            docker_client, test_image, {**cache.env, "XPUKIT_KERNEL_CACHE_PASSWORD_FILE": str(wrong)}
        )
        assert all(result["exact"].values()) and len(result["exact"]) == 6
        warnings = lines_with(err, "kernel cache", "unavailable")
        assert len(warnings) == 1 and "not-the-password" not in err, err[-2000:]
        with cache.client() as redis:
            assert redis_names(redis) == []


@pytest.mark.docker
def test_redis_down_is_one_warning(docker_client, test_image, tmp_path):
    env = {"HOME": str(tmp_path / "home"), "XPUKIT_KERNEL_CACHE": f"redis://127.0.0.1:{free_port()}"}
    result, err = run_probe(docker_client, test_image, env)
    assert all(result["exact"].values()) and len(result["exact"]) == 6
    assert result["errors"] >= 1
    assert len(lines_with(err, "kernel cache", "unavailable")) == 1, err[-2000:]


# ---------------------------------------------------------------- the tasks' own containers


def invoke_compile(cache: Cache, out: Path, local_cache: Path) -> tuple[subprocess.CompletedProcess, float]:
    """`invoke compile` with its own local cache folder (`XPUKIT_CACHE_DIR`), as on a machine of its
    own: compile keeps Triton's cache there between runs, which would answer before Redis."""
    env = {
        **os.environ,
        **cache.env,
        "XPUKIT_KERNEL_CACHE_DEBUG": "1",
        "XPUKIT_PROFILE": "cpu",
        "XPUKIT_ENGINE": "docker",
        "XPUKIT_CACHE_DIR": str(local_cache),
    }
    env["XPUKIT_IMAGE"] = os.environ.get("XPUKIT_IMAGE", "xpukit")
    env.pop("CI", None)
    cmd = [sys.executable, "-m", "invoke", "compile", "examples/kernels.py:scale_kernel", "--where", "container"]
    started = time.monotonic()
    proc = subprocess.run(
        [*cmd, "--out", str(out)], cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False
    )
    return proc, time.monotonic() - started


@pytest.mark.docker
def test_invoke_compile_twice_hits_the_shared_cache(docker_client, test_image, tmp_path):
    """`invoke compile` with XPUKIT_KERNEL_CACHE (and its key and password files) exported on the
    host, as a new user would: the first run fills Redis, the second (another local cache folder,
    as on a second machine) finds everything there."""
    with shared_cache_server(tmp_path) as cache:
        first, first_s = invoke_compile(cache, tmp_path / "out1", tmp_path / "machine1")
        assert first.returncode == 0, first.stderr[-2000:]
        with cache.client() as redis:
            names = redis_names(redis)
        assert names and all(n.startswith(cache.prefix) for n in names), names
        # The container's output (its log lines included) comes through invoke's stdout.
        assert lines_with(first.stdout, "kernel cache miss") and not lines_with(first.stdout, "kernel cache hit")
        second, second_s = invoke_compile(cache, tmp_path / "out2", tmp_path / "machine2")
        assert second.returncode == 0, second.stderr[-2000:]
        assert lines_with(second.stdout, "kernel cache hit") and not lines_with(second.stdout, "kernel cache miss")
        assert not lines_with(first.stdout + second.stdout, "unavailable")
        for zebin in (tmp_path / "out1").rglob("*.zebin"):
            assert zebin.read_bytes() == (tmp_path / "out2" / zebin.relative_to(tmp_path / "out1")).read_bytes()
        print(f"invoke compile: {first_s:.2f} s filling the cache, {second_s:.2f} s from it")


@pytest.mark.docker
def test_the_devcontainer_reaches_the_hosts_shared_cache(docker_client, test_image, tmp_path):
    """devcontainer.json generated with the cache set (what `invoke devcontainer` writes then),
    brought up by the devcontainer CLI: the image's user reads the key and password, and reaches
    Redis on the host's loopback."""

    from xpukit.host.run import devcontainer

    if not CLI.exists():
        message = "needs the devcontainer CLI: npm ci --prefix env/npm"
        if os.environ.get("XPUKIT_REQUIRE_DOCKER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    with shared_cache_server(tmp_path) as cache:
        volume = f"xpukit-test-devcontainer-cache-{os.getpid()}"
        override = tmp_path / "devcontainer.json"
        content = devcontainer.config(test_image, "cpu", volume, None, shared_cache.forwarding(cache.env))
        override.write_text(json.dumps(content))
        env = {**os.environ, "DOCKER_BUILDKIT": "1"}
        try:
            up = run_cli("up", "--override-config", str(override), env=env)
            assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-2000:]
            probe = run_cli(
                "exec", "--override-config", str(override), "python", "tests/support/kernel_cache_probe.py", env=env
            )
            assert probe.returncode == 0, probe.stdout[-2000:] + probe.stderr[-2000:]
            result = json.loads(probe.stdout.strip().splitlines()[-1])
            assert all(result["exact"].values()) and result["stores"] > 0 and result["errors"] == 0, result
            with cache.client() as redis:
                assert redis_names(redis, cache.prefix + "*")
        finally:
            for c in docker_client.containers.list(
                all=True, filters={"label": f"devcontainer.local_folder={REPO_ROOT}"}
            ):
                c.remove(force=True)
            for v in docker_client.volumes.list(filters={"name": volume}):
                v.remove(force=True)
