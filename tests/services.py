"""Real services for tests, each on 127.0.0.1 with its own data folder, stopped by process id:
an OCI registry (Debian's docker-registry, distribution 2.8) with htpasswd users, and a second
Docker engine beside the first. A missing binary skips (or fails, under XPUKIT_REQUIRE_DOCKER=1)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest


def need(binary: str, package: str) -> str:
    path = shutil.which(binary) or (f"/usr/bin/{binary}" if os.path.exists(f"/usr/bin/{binary}") else None)
    if path is None:
        message = f"needs {binary} (apt-get install {package})"
        if os.environ.get("XPUKIT_REQUIRE_DOCKER") == "1":
            pytest.fail(message)
        pytest.skip(message)
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


@contextlib.contextmanager
def redis_server(root: Path) -> Iterator[int]:
    """redis-server on 127.0.0.1:<free port>, its data in ``root``, no persistence; yields the port."""
    binary = need("redis-server", "redis-server")
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = root / "redis.log"
    cmd = [binary, "--bind", "127.0.0.1", "--port", str(port), "--dir", str(root), "--save", "", "--appendonly", "no"]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"redis-server exited ({proc.returncode}): {log.read_text()[-1500:]}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not answer: {log.read_text()[-1500:]}")
            time.sleep(0.2)
        yield port
    finally:
        stop(proc)
