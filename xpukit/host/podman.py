"""podman as the kit's engine: its Docker-compatible API service, and what differs from Docker.

The tasks talk to podman the way they talk to Docker, through the docker SDK, over the API that
``podman system service`` serves. Where that service is already running (systemd's
``podman.socket``, or ``CONTAINER_HOST``) the kit uses it; otherwise it starts one for the length
of the task and stops it by process id when the task ends. Builds go through ``podman build``
(buildah), which reads the same Dockerfile, secrets and cache mounts.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from xpukit.errors import XpukitError

# Idle seconds after which a service the kit started stops by itself, should the kit be killed
# before it can stop the service (the kit stops it at exit otherwise).
SERVICE_IDLE_TIMEOUT = 120
INSTALL_FIX = "install it (Debian: apt-get install podman), or use Docker (XPUKIT_ENGINE=docker)"
KEEP_SERVICE_FIX = (
    "keep one running: `systemctl --user enable --now podman.socket` (rootless) or "
    "`sudo systemctl enable --now podman.socket` (rootful)"
)


def find_podman() -> str | None:
    return shutil.which("podman")


def rootless(euid: int | None = None) -> bool:
    """A local podman runs rootless exactly when its caller is not root."""
    return (os.geteuid() if euid is None else euid) != 0


def socket_candidates(environ: Mapping[str, str], euid: int | None = None) -> list[str]:
    """Where a running podman API service listens: CONTAINER_HOST, then the systemd socket."""
    found = []
    if environ.get("CONTAINER_HOST", "").startswith("unix://"):
        found.append(environ["CONTAINER_HOST"])
    if rootless(euid):
        runtime_dir = environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.geteuid() if euid is None else euid}"
        found.append(f"unix://{runtime_dir}/podman/podman.sock")
    else:
        found.append("unix:///run/podman/podman.sock")
    return found


class Service:
    """A ``podman system service`` the kit started; stopped by pid at exit (or after idling)."""

    def __init__(self, podman: str, say: Callable[[str], None], env: Mapping[str, str] | None = None) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="xpukit-podman-"))
        self.endpoint = f"unix://{self.folder}/podman.sock"
        self.log = self.folder / "service.log"
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [podman, "system", "service", f"--time={SERVICE_IDLE_TIMEOUT}", self.endpoint],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C in the task must not kill the service mid-request
                env=None if env is None else dict(env),
            )
        atexit.register(self.stop)
        say(f"engine: podman's API service is not running; started one for this task (pid {self.process.pid})")

    def wait_ready(self, ping: Callable[[str], bool], seconds: float = 20.0) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            if (self.folder / "podman.sock").exists() and ping(self.endpoint):
                return
            time.sleep(0.1)
        tail = self.log.read_text(errors="replace").strip().splitlines()[-1:] if self.log.exists() else []
        self.stop()
        raise XpukitError(
            f"podman's API service did not start ({tail[0][:120] if tail else 'no output'})", KEEP_SERVICE_FIX
        )

    def ulimits(self) -> list[dict[str, Any]]:
        return process_ulimits(self.process.pid)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def process_ulimits(pid: int, proc_root: str = "/proc") -> list[dict[str, Any]]:
    """The open-files and processes limits a process runs with, as container ulimits.

    podman sets its own container defaults (nofile 1048576, nproc 4194304 as root) where Docker's
    containers inherit the daemon's limits, and podman lowers its own limits when it starts. A
    host whose limits are below podman's defaults refuses every container ("error setting
    rlimit"); the limits of the service that starts the container always fit."""
    wanted = {"Max open files": "nofile", "Max processes": "nproc"}
    limits = []
    text = Path(proc_root, str(pid), "limits").read_text()
    for line in text.splitlines():
        match = re.match(r"(Max [a-z ]+?)\s{2,}(\S+)\s+(\S+)", line)
        if match and match.group(1) in wanted and match.group(3).isdigit():
            hard = int(match.group(3))
            soft = int(match.group(2)) if match.group(2).isdigit() else hard
            limits.append({"name": wanted[match.group(1)], "soft": soft, "hard": hard})
    return limits


def explain_start_failure(message: str) -> XpukitError | None:
    """A container podman could not start, in one line with its fix; None when not podman's limits."""
    if "error setting rlimit" in message:
        return XpukitError(
            "podman cannot give containers its default open-files/processes limits on this host",
            "let the kit start podman's service (stop the running one, or unset CONTAINER_HOST): it then "
            "passes the service's own limits; or set default_ulimits in containers.conf",
        )
    return None
