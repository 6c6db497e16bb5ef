"""`invoke base`: a local base image from Debian's archive, for machines that cannot pull.

mmdebstrap where it is installed (reproducible: the same base ID on every machine for one commit
and one state of the mirror), else debootstrap, said in one line (a new base ID on every run)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from xpukit.errors import UsageError, XpukitError

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


# ---------------------------------------------------------------- a reproducible base (mmdebstrap)

ARCHITECTURES = {"x86_64": "amd64", "aarch64": "arm64"}
MMDEBSTRAP_FIX = "apt-get install mmdebstrap"


def find_mmdebstrap(path: str | None = None) -> str | None:
    search = os.pathsep.join([path if path is not None else os.environ.get("PATH", ""), *SBIN_DIRS])
    return shutil.which("mmdebstrap", path=search)


def choose_reproducible(
    reproducible: bool, debootstrap: bool, epoch: str, find: Callable[[], str | None] = find_mmdebstrap
) -> tuple[bool, str]:
    """Whether `invoke base` makes the reproducible base, and the one line that says why not.

    By default it does wherever mmdebstrap is installed and a time to date it by exists (the
    commit's, or SOURCE_DATE_EPOCH); ``reproducible`` (--reproducible) insists, failing where it
    cannot; ``debootstrap`` (--debootstrap) asks for the old base, whose ID changes on every run."""
    if reproducible and debootstrap:
        raise UsageError("--reproducible and --debootstrap exclude each other", "pass one of them, or neither")
    if debootstrap or reproducible:
        return reproducible, ""
    if not find():
        why = f"mmdebstrap is not installed ({MMDEBSTRAP_FIX} for a reproducible base)"
    elif not epoch:
        why = "no git commit and no SOURCE_DATE_EPOCH to date a reproducible base"
    else:
        return True, ""
    return False, f"base: {why}; debootstrap instead: this base gets a new ID on every run"


def mmdebstrap_command(mmdebstrap: str, suite: str, mirror: str, out: str) -> list[str]:
    """A minbase rootfs as one tar, without device nodes (the engine makes /dev) and with apt's
    lists and caches cleaned (mmdebstrap's default): bit-identical for one SOURCE_DATE_EPOCH and
    one state of the mirror."""
    return [mmdebstrap, "--variant=minbase", "--mode=root", "--skip=output/dev", "--quiet", suite, out, mirror]


def image_archive(layer: Path, tag: str, epoch: int, created_by: str, out: Path, machine: str = "") -> str:
    """Write a docker-archive holding ``layer`` as the only layer, dated ``epoch``, to ``out``; its
    config bytes depend only on the layer, the time and the command, so its image ID does too.
    Returns that ID. (``docker import`` would stamp the clock into the config.)"""
    import datetime as dt
    import hashlib
    import io
    import json
    import platform
    import tarfile

    digest = hashlib.sha256()
    with open(layer, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    created = dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    arch = ARCHITECTURES.get(machine or platform.machine(), machine or platform.machine())
    config = {
        "architecture": arch,
        "os": "linux",
        "created": created,
        "config": {"Env": ["LANG=C.UTF-8"], "Cmd": ["bash"]},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{digest.hexdigest()}"]},
        "history": [{"created": created, "created_by": created_by}],
    }
    config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    image_id = hashlib.sha256(config_bytes).hexdigest()
    manifest = [{"Config": f"{image_id}.json", "RepoTags": [tag], "Layers": [f"{digest.hexdigest()}/layer.tar"]}]

    def add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode = len(data), epoch, 0o644
        tar.addfile(info, io.BytesIO(data))

    with tarfile.open(out, "w") as tar:
        add(tar, f"{image_id}.json", config_bytes)
        info = tar.gettarinfo(str(layer), arcname=f"{digest.hexdigest()}/layer.tar")
        info.mtime, info.uid, info.gid, info.uname, info.gname = epoch, 0, 0, "", ""
        with open(layer, "rb") as f:
            tar.addfile(info, f)
        add(tar, "manifest.json", json.dumps(manifest).encode())
    return f"sha256:{image_id}"


def build_reproducible_base(
    suite: str, mirror: str, tag: str, cli: str, epoch: str, dry_run: bool, say: Callable[[str], None] = print
) -> int:
    """`invoke base --reproducible`: mmdebstrap with SOURCE_DATE_EPOCH, loaded with a config that
    holds no clock: the same commit and mirror state give the same base image ID on every machine."""
    found = find_mmdebstrap()
    if dry_run:
        when = epoch or "<the commit time; no git commit here>"
        say(
            f"would run: SOURCE_DATE_EPOCH={when} "
            + " ".join(mmdebstrap_command("mmdebstrap", suite, mirror, "ROOTFS.tar"))
        )
        say(f"would run: {cli} load -i ARCHIVE (one layer, config dated {when})")
        return 0
    if not epoch:
        raise XpukitError(
            "a reproducible base needs SOURCE_DATE_EPOCH (no git commit to take it from)",
            "run it in a git checkout, or set SOURCE_DATE_EPOCH",
        )
    if not found:
        raise XpukitError("mmdebstrap is not installed", f"install it: sudo {MMDEBSTRAP_FIX}")
    check_prerequisites(which=lambda: found)
    workdir = Path(tempfile.mkdtemp(prefix="xpukit-base-", dir="/var/tmp"))
    try:
        layer = workdir / "rootfs.tar"
        cmd = mmdebstrap_command(found, suite, mirror, str(layer))
        say(f"base: mmdebstrap {suite} from {mirror}, SOURCE_DATE_EPOCH={epoch} (about a minute)")
        result = subprocess.run(
            cmd, capture_output=True, text=True, check=False, env={**os.environ, "SOURCE_DATE_EPOCH": epoch}
        )
        if result.returncode != 0:
            tail = (result.stdout + result.stderr).strip().splitlines()[-3:]
            raise XpukitError(
                f"mmdebstrap failed: {' / '.join(tail)}",
                "check that the mirror is reachable (--mirror / XPUKIT_BASE_MIRROR) and the suite exists",
            )
        archive = workdir / "image.tar"
        image_id = image_archive(layer, tag, int(epoch), f"mmdebstrap --variant=minbase {suite} {mirror}", archive)
        layer.unlink()
        loaded = subprocess.run([cli, "load", "-i", str(archive)], capture_output=True, text=True, check=False)
        if loaded.returncode != 0:
            raise XpukitError(
                f"loading the base failed: {(loaded.stderr or 'no output').strip().splitlines()[-1]}",
                "check that the engine answers (docker info / podman info)",
            )
        say(f"base: {tag} ready ({image_id}; the same commit and mirror state give this ID everywhere)")
        return 0
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
