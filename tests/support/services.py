"""Real services for tests, each on 127.0.0.1 with its own data folder, stopped by process id:
an OCI registry (Debian's docker-registry, distribution 2.8) with htpasswd users, a second
Docker engine beside the first, and redis-server (with a password, with TLS from a CA made here
with openssl). A missing binary skips (or fails, under XPUKIT_REQUIRE_DOCKER=1)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from xpukit.runtime import cache_auth

if TYPE_CHECKING:
    import redis


class MissingTool(RuntimeError):
    """A binary a service needs is not installed (outside pytest; under pytest it is a skip or a failure)."""


def need(binary: str, package: str) -> str:
    path = shutil.which(binary) or (f"/usr/bin/{binary}" if os.path.exists(f"/usr/bin/{binary}") else None)
    if path is None:
        message = f"needs {binary} (apt-get install {package})"
        if "pytest" in sys.modules:  # under pytest: a skip, or a failure where CI requires the service
            import pytest

            if os.environ.get("XPUKIT_REQUIRE_DOCKER") == "1":
                pytest.fail(message)
            pytest.skip(message)
        raise MissingTool(message)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc: subprocess.Popen, grace: float = 10) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_http(url: str, proc: subprocess.Popen, log: Path, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: the service exited ({proc.returncode}): {log.read_text()[-1500:]}")
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except urllib.error.HTTPError:
            return  # it answers (401 without credentials)
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {timeout} s: {log.read_text()[-1500:]}")


@contextlib.contextmanager
def registry(root: Path, users: dict[str, str], read_only: bool = False) -> Iterator[str]:
    """A registry on 127.0.0.1:<free port> with htpasswd users; yields ``127.0.0.1:PORT``."""
    binary = need("docker-registry", "docker-registry")
    htpasswd = need("htpasswd", "apache2-utils")
    root.mkdir(parents=True, exist_ok=True)
    users_file = root / "htpasswd"
    users_file.write_text("")
    for user, password in users.items():
        subprocess.run([htpasswd, "-Bb", str(users_file), user, password], check=True, capture_output=True)
    port = free_port()
    readonly = "\n  maintenance:\n    readonly:\n      enabled: true" if read_only else ""
    (root / "config.yml").write_text(
        f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {root / 'data'}{readonly}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
        f"auth:\n  htpasswd:\n    realm: xpukit-test\n    path: {users_file}\n"
    )
    log = root / "registry.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([binary, "serve", str(root / "config.yml")], stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_http(f"http://127.0.0.1:{port}/v2/", proc, log)
        yield f"127.0.0.1:{port}"
    finally:
        stop(proc)


@contextlib.contextmanager
def second_engine(root: Path, extra_env: Mapping[str, str] | None = None) -> Iterator[str]:
    """Another dockerd with its own data root, exec root, socket, pid file and bridge, and no
    iptables rules, so it never touches the first engine's network; yields its DOCKER_HOST.
    (``--bridge none`` is not enough: that dockerd deletes an existing docker0.)
    ``extra_env`` is added to the daemon's environment (e.g. MOBY_DISABLE_PIGZ=1)."""
    dockerd = need("dockerd", "docker.io")
    root.mkdir(parents=True, exist_ok=True)
    # unix socket paths are limited to ~100 bytes: keep the runtime files in a short temp dir.
    short = Path(subprocess.run(["mktemp", "-d", "/tmp/xpk-eng.XXXX"], capture_output=True, text=True).stdout.strip())
    sock = short / "docker.sock"
    log = root / "dockerd.log"
    ip = need("ip", "iproute2")
    bridge = "xpkbr" + os.urandom(3).hex()
    subprocess.run([ip, "link", "add", bridge, "type", "bridge"], check=True, capture_output=True)
    cmd = [
        dockerd,
        "--data-root", str(root / "data"),
        "--exec-root", str(short / "exec"),
        "-H", f"unix://{sock}",
        "--pidfile", str(short / "docker.pid"),
        "--bridge", bridge,
        "--iptables=false",
        "--ip-forward=false",
    ]  # fmt: skip
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(extra_env or {})})
    host = f"unix://{sock}"
    try:
        import docker

        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"second dockerd exited ({proc.returncode}): {log.read_text()[-1500:]}")
            try:
                client = docker.DockerClient(base_url=host, timeout=5)
                client.ping()
                client.close()
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"second dockerd did not answer: {log.read_text()[-1500:]}") from None
                time.sleep(0.5)
        yield host
    finally:
        stop(proc, grace=30)
        subprocess.run([ip, "link", "delete", bridge], check=False, capture_output=True)
        shutil.rmtree(short, ignore_errors=True)
        shutil.rmtree(root / "data", ignore_errors=True)


@dataclasses.dataclass(frozen=True)
class TlsFiles:
    ca: Path  # the CA's certificate (what clients trust)
    cert: Path  # the server's, for IP:127.0.0.1 and DNS:localhost
    key: Path


def make_tls_certs(folder: Path, name: str = "xpukit-test") -> TlsFiles:
    """A throwaway CA and a server certificate it signed (EC P-256, valid two days), with openssl."""
    openssl = need("openssl", "openssl")
    folder.mkdir(parents=True, exist_ok=True)
    ca, ca_key, cert, key, csr = (folder / f for f in ("ca.pem", "ca.key", "server.pem", "server.key", "server.csr"))
    ext = folder / "server.ext"
    ext.write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\nauthorityKeyIdentifier=keyid\n"
    )
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for cmd in (
        [openssl, "req", "-x509", *ec, "-keyout", ca_key, "-out", ca, "-days", "2", "-subj", f"/CN={name} CA",
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
        [openssl, "req", *ec, "-keyout", key, "-out", csr, "-subj", "/CN=localhost"],
        [openssl, "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert,
         "-days", "2", "-extfile", ext],
    ):  # fmt: skip
        subprocess.run([str(c) for c in cmd], check=True, capture_output=True)
    return TlsFiles(ca, cert, key)


def redis_client(port: int, password: str | None = None, tls: TlsFiles | None = None) -> redis.Redis:
    """redis-py (the kit's own client, also in env/lock/host.txt) on a test's Redis, to look at and
    tamper with it from the host."""
    import redis

    ssl = {"ssl": True, "ssl_ca_certs": str(tls.ca)} if tls is not None else {}
    return redis.Redis(host="127.0.0.1", port=port, password=password, socket_timeout=10, **ssl)


def redis_names(client: redis.Redis, pattern: str = "*") -> list[str]:
    """The key names matching ``pattern``, sorted, as text."""
    return sorted(name.decode() for name in client.keys(pattern))


@contextlib.contextmanager
def redis_server(root: Path, password: str | None = None, tls: TlsFiles | None = None) -> Iterator[int]:
    """redis-server on 127.0.0.1:<free port>, its data in ``root``, no persistence; yields the port.

    ``password``: ``requirepass``. ``tls``: the port speaks TLS only (server certificate from
    :func:`make_tls_certs`; clients need no certificate of their own)."""
    from redis import RedisError

    binary = need("redis-server", "redis-server")
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = root / "redis.log"
    cmd = [binary, "--bind", "127.0.0.1", "--dir", str(root), "--save", "", "--appendonly", "no"]
    if tls is None:
        cmd += ["--port", str(port)]
    else:
        cmd += ["--port", "0", "--tls-port", str(port), "--tls-cert-file", str(tls.cert)]
        cmd += ["--tls-key-file", str(tls.key), "--tls-ca-cert-file", str(tls.ca), "--tls-auth-clients", "no"]
    if password is not None:
        (root / "redis.conf").write_text(f"requirepass {password}\n")  # not on the command line (ps)
        os.chmod(root / "redis.conf", 0o600)
        cmd.insert(1, str(root / "redis.conf"))
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"redis-server exited ({proc.returncode}): {log.read_text()[-1500:]}")
            with contextlib.suppress(OSError, RedisError), redis_client(port, password, tls) as client:
                if client.ping():
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not answer: {log.read_text()[-1500:]}")
            time.sleep(0.2)
        yield port
    finally:
        stop(proc)


def unsealed(value: bytes) -> bytes:
    """The payload of a sealed cache value without checking it: the tests forge entries with it."""
    return value[cache_auth.HEADER_BYTES :] if value.startswith(cache_auth.MAGIC) else value
