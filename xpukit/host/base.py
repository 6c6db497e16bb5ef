"""`invoke base`: a local base image from a debootstrap rootfs, for machines that cannot pull."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from xpukit.errors import XpukitError

# Left out of the imported image: package caches debootstrap keeps, and lists apt refreshes anyway.
EXCLUDES = ("./var/cache/apt/archives/*.deb", "./var/lib/apt/lists/*", "./dev/*", "./proc/*", "./sys/*")


def commands(
    rootfs: str, suite: str, mirror: str, tag: str, cli: str, debootstrap: str = "debootstrap"
) -> list[list[str]]:
    """debootstrap, then tar piped into `docker import` (the pipe is shown as two commands)."""
    tar = ["tar", "-C", rootfs, "--numeric-owner", *[f"--exclude={e}" for e in EXCLUDES], "-c", "."]
    return [
        [debootstrap, "--variant=minbase", suite, rootfs, mirror],
        tar,
        [cli, "import", "--change", 'CMD ["bash"]', "--change", "ENV LANG=C.UTF-8", "-", tag],
    ]


# Root's tools live in sbin, which a user's PATH kept through sudo (sudo -E, sudo env PATH=...) lacks.
SBIN_DIRS = ("/usr/local/sbin", "/usr/sbin", "/sbin")


def find_debootstrap(path: str | None = None) -> str | None:
    """debootstrap on PATH, else in the sbin folders."""
    search = os.pathsep.join([path if path is not None else os.environ.get("PATH", ""), *SBIN_DIRS])
    return shutil.which("debootstrap", path=search)


def check_prerequisites(euid: int | None = None, which: Callable[[], str | None] = find_debootstrap) -> str:
    """The debootstrap to run, once root is confirmed."""
    euid = os.geteuid() if euid is None else euid
    if euid != 0:
        raise XpukitError(
            "`invoke base` must run as root (debootstrap creates device nodes and runs a chroot)",
            # sudo's secure_path drops the venv holding invoke: name it by its full path.
            'run `sudo "$(command -v invoke)" base`, or pull the pinned base where a registry is reachable',
        )
    found = which()
    if not found:
        raise XpukitError("debootstrap is not installed", "install it: sudo apt-get install debootstrap")
    return found


def build_base(suite: str, mirror: str, tag: str, cli: str, dry_run: bool, say: Callable[[str], None] = print) -> int:
    """Bootstrap ``suite`` into a temporary rootfs and import it as ``tag``."""
    if dry_run:
        steps = commands("ROOTFS", suite, mirror, tag, cli)
        say("would run: " + " ".join(steps[0]))
        say("would run: " + " ".join(steps[1]) + " | " + " ".join(steps[2]))
        return 0
    debootstrap_path = check_prerequisites()
    workdir = tempfile.mkdtemp(prefix="xpukit-base-")
    rootfs = str(Path(workdir) / "rootfs")
    try:
        debootstrap, tar, docker_import = commands(rootfs, suite, mirror, tag, cli, debootstrap_path)
        say(f"base: debootstrap {suite} from {mirror} (about half a minute)")
        result = subprocess.run(debootstrap, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            tail = (result.stdout + result.stderr).strip().splitlines()[-3:]
            raise XpukitError(
                f"debootstrap failed: {' / '.join(tail)}",
                "check that the mirror is reachable (--mirror / XPUKIT_BASE_MIRROR) and the suite exists",
            )
        say(f"base: importing the rootfs as {tag}")
        with subprocess.Popen(tar, stdout=subprocess.PIPE) as producer:
            imported = subprocess.run(docker_import, stdin=producer.stdout, capture_output=True, text=True, check=False)
            producer.stdout.close()  # type: ignore[union-attr]
            producer.wait()
        if producer.returncode != 0 or imported.returncode != 0:
            raise XpukitError(
                f"importing the base failed: {(imported.stderr or 'tar failed').strip().splitlines()[-1]}",
                "check that the Docker engine answers (docker info)",
            )
        say(f"base: {tag} ready ({imported.stdout.strip()[:19]})")
        return 0
    finally:
        # A debootstrap that stopped half way can leave /proc or /sys mounted inside the rootfs.
        for mount in ("proc", "sys", "dev/pts"):
            subprocess.run(["umount", "-l", str(Path(rootfs) / mount)], capture_output=True, check=False)
        shutil.rmtree(workdir, ignore_errors=True)
