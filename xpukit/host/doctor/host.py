"""The host half of ``invoke doctor``: engine, BuildKit, Intel GPUs and their access, disk, and
whether the runtime can run on the host itself. Sysfs and /dev come from roots given as
parameters and the engine and BuildKit from injected probes, so every check runs in tests without
Docker or a GPU."""

import grp
import importlib.util
import os
import re
import shutil
from collections.abc import Callable
from typing import Any

from xpukit.errors import XpukitError
from xpukit.host import gpu
from xpukit.host.doctor.findings import Finding
from xpukit.runtime.image.doctor_probe import driver_line
from xpukit.runtime.offline.ocloc import find_ocloc

GIB = 1024**3
# Rough free-space needs (estimates, not measurements): PyTorch's build tree + ccache is tens of GiB,
# LLVM from source adds more; the cpu image (~1.4 GiB) with BuildKit's cache and wheelhouse a few.
# The one statement of the doctor's disk budget; warn below it.
SOURCE_BUILD_FREE_GIB = 80
IMAGE_ONLY_FREE_GIB = 10


def disk_budget_gib(profile: str) -> int:
    """Free space the doctor asks for: the xpu profile builds from source, the cpu one does not."""
    return SOURCE_BUILD_FREE_GIB if profile == "xpu" else IMAGE_ONLY_FREE_GIB


ContainerRunner = Callable[[str, list[str], dict[str, Any]], tuple[int, str]]
Probe = Callable[[], tuple[bool, str]]


def _group_name(gid: int | None) -> str:
    if gid is None:
        return "?"
    try:
        return f"{grp.getgrgid(gid).gr_name} (gid {gid})"
    except KeyError:
        return f"gid {gid}"


def check_engine(engine_probe: Probe) -> Finding:
    ok, why = engine_probe()
    if ok:
        return Finding("ok", "engine", f"engine reachable ({why})")
    return Finding(
        "fail",
        "engine",
        f"no Docker engine: {why}",
        "start one (`sudo systemctl start docker`) or set DOCKER_HOST; add yourself to the docker group",
    )


def check_buildkit(buildkit_probe: Probe) -> Finding:
    ok, why = buildkit_probe()
    if ok:
        return Finding("ok", "buildkit", why)
    return Finding(
        "fail",
        "buildkit",
        f"BuildKit unavailable: {why}",
        "install the buildx plugin (docker-buildx-plugin), or use a docker CLI older than 23 with DOCKER_BUILDKIT=1",
    )


def check_gpus(sysfs_root: str, dev_root: str, host_root: str, user: gpu.UserIds) -> list[Finding]:
    findings: list[Finding] = []
    nodes = gpu.render_nodes(sysfs_root, dev_root)
    intel = [n for n in nodes if n.is_intel]
    wsl = gpu.detect_wsl(dev_root, host_root)
    if wsl.detected:
        findings.append(Finding("ok", "wsl", "WSL2 GPU paravirtualization: /dev/dxg present"))
        if wsl.lib_dir:
            findings.append(Finding("ok", "wsl-libs", "/usr/lib/wsl present (mounted read-only into containers)"))
        else:
            findings.append(
                Finding(
                    "fail",
                    "wsl-libs",
                    "/dev/dxg present but /usr/lib/wsl is missing",
                    "update WSL (`wsl --update`) and install Intel's Windows GPU driver",
                )
            )
    if not intel:
        if wsl.detected:
            findings.append(
                Finding("skip", "gpu", "no /dev/dri render node (normal on WSL: the GPU is behind /dev/dxg)")
            )
            return findings
        others = ", ".join(f"{n.name} {n.vendor}:{n.device}" for n in nodes)
        findings.append(
            Finding(
                "warn",
                "gpu",
                "no Intel GPU render node" + (f" (other GPUs: {others})" if others else " (no /dev/dri render node)"),
                "the cpu profile works without a GPU; for xpu use a host with an Intel GPU and its "
                "i915/xe driver loaded",
            )
        )
        return findings
    for n in intel:
        where = f" at {n.pci_slot}" if n.pci_slot else ""
        if not n.exists:
            findings.append(
                Finding(
                    "fail",
                    "gpu",
                    f"sysfs lists {n.name} ({n.model}, {n.vendor}:{n.device}){where} but {n.dev_path} is missing",
                    "check that udev created the node (`ls -l /dev/dri`), or reload the driver",
                )
            )
            continue
        findings.append(Finding("ok", "gpu", f"{n.name}: {n.model} ({n.vendor}:{n.device}){where}"))
        findings.append(_driver_finding(n))
        findings.append(_access_finding(n, user))
    return findings


def _driver_finding(n: gpu.RenderNode) -> Finding:
    if n.driver in ("i915", "xe"):
        return Finding("ok", "driver", f"{n.name}: kernel driver {n.driver}")
    if not n.driver:
        return Finding(
            "fail",
            "driver",
            f"{n.name}: no kernel driver bound",
            "load the GPU driver (`sudo modprobe xe` for BMG/LNL, `sudo modprobe i915` for PVC/DG2/MTL)",
        )
    return Finding(
        "warn",
        "driver",
        f"{n.name}: unexpected kernel driver {n.driver!r}",
        "bind the device to i915 or xe; compute through Level Zero needs one of them",
    )


def _access_finding(n: gpu.RenderNode, user: gpu.UserIds) -> Finding:
    mode = n.mode or 0
    owner = f"mode {mode:04o}, group {_group_name(n.gid)}"
    group_rw = mode & 0o060 == 0o060
    if n.accessible_by(user):
        return Finding("ok", "access", f"{n.dev_path}: you can open it ({owner})")
    group = _group_name(n.gid).split(" ")[0]
    if group_rw and n.gid:
        return Finding(
            "warn",
            "access",
            f"{n.dev_path}: your user cannot open it ({owner}); containers still get it via --group-add {n.gid}",
            f"to use it outside containers: sudo usermod -aG {group} $USER, then log in again",
        )
    return Finding(
        "fail",
        "access",
        f"{n.dev_path}: its group cannot read and write it ({owner}): no container user can open it",
        'add a udev rule: SUBSYSTEM=="drm", KERNEL=="renderD*", GROUP="render", MODE="0660"',
    )


def check_disk(path: str, free_bytes: int | None, need_gib: int) -> Finding:
    if free_bytes is None:
        return Finding("skip", "disk", f"cannot read free space at {path}")
    free = free_bytes / GIB
    found = f"{free:.0f} GiB free at {path}"
    # The xpu profile's source builds are what need the big number; the cpu image needs a few GiB.
    what = "a source build (PyTorch/LLVM)" if need_gib >= SOURCE_BUILD_FREE_GIB else "the image and its caches"
    if free >= need_gib:
        return Finding("ok", "disk", f"{found} (~{need_gib} GiB wanted for {what})")
    fix = "free space or move Docker's data-root"
    if need_gib >= SOURCE_BUILD_FREE_GIB:
        fix += "; or build with --torch none/wheel and a prebuilt LLVM"
    return Finding("warn", "disk", f"{found}; ~{need_gib} GiB wanted for {what}", fix)


def check_layer_decompression(kind: str, endpoint: str, which: Callable[[str], str | None] = shutil.which) -> Finding:
    """Docker's engine gunzips pulled layers through ``unpigz`` when its PATH has one, and in Go
    otherwise; a pull of the cpu image took 1.85x as long without it (docs/benchmarks/build.md).
    Podman decompresses in parallel by itself. Only a local engine shares this host's PATH."""
    if kind != "docker":
        return Finding("skip", "pull", f"{kind} decompresses pulled layers itself")
    if endpoint and not endpoint.startswith("unix://"):
        return Finding("skip", "pull", f"the engine at {endpoint} is remote: unpigz on its host speeds its pulls")
    if which("unpigz"):
        return Finding("ok", "pull", "unpigz found: the engine decompresses pulled layers with it")
    return Finding(
        "warn",
        "pull",
        "unpigz not found: the engine decompresses pulled layers in Go, about 1.85x slower",
        "apt-get install pigz (dockerd looks for unpigz on its PATH at each pull; no restart)",
    )


def check_host_run(
    find_module: Callable[[str], Any] = importlib.util.find_spec, ocloc_probe: Callable[[], Any] = find_ocloc
) -> Finding:
    """What `invoke compile --where host` needs: Triton and numpy in this interpreter, and ocloc."""
    missing = [name for name in ("triton", "numpy") if find_module(name) is None]
    try:
        tool = ocloc_probe()
        ocloc_found = tool.describe()
    except XpukitError:
        ocloc_found = ""
    if not missing and ocloc_found:
        return Finding("ok", "host-run", f"--where host can compile: Triton, numpy and {ocloc_found}")
    lacks = [*(f"{name} (python)" for name in missing), *(["ocloc"] if not ocloc_found else [])]
    return Finding(
        "skip" if len(lacks) == 3 else "warn",
        "host-run",
        f"--where host lacks {', '.join(lacks)}; the image has them",
        "run in the image (the default where an engine answers), or pip install -r env/lock/cpu.txt "
        "and set XPUKIT_OCLOC to ocloc 26.27 or later",
    )


# Where distributions put the Level Zero loader: Debian/Ubuntu's multiarch folder, RHEL's and SUSE's
# lib64, then the generic ones (a source install under /usr/local).
LOADER_DIRS = ("usr/lib/x86_64-linux-gnu", "usr/lib64", "usr/lib", "usr/local/lib")
_LOADER_FIX = {
    "rpm": "sudo dnf install level-zero intel-level-zero-gpu (Intel's GPU repository for RHEL)",
    "suse": "sudo zypper install level-zero intel-level-zero-gpu (Intel's GPU repository for SLES)",
    "deb": "sudo apt-get install libze1 libze-intel-gpu1 (Intel's GPU repository for Ubuntu)",
}


def os_family(host_root: str = "/") -> str:
    """deb, rpm or suse, from /etc/os-release's ID and ID_LIKE ("" when unknown)."""
    try:
        with open(os.path.join(host_root, "etc/os-release"), encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return ""
    ids = " ".join(m.group(1).strip('"') for m in re.finditer(r"^(?:ID|ID_LIKE)=(.*)$", text, re.M)).split()
    if any(i in ("sles", "opensuse", "suse", "opensuse-leap", "opensuse-tumbleweed") for i in ids):
        return "suse"
    if any(i in ("rhel", "centos", "fedora", "rocky", "almalinux") for i in ids):
        return "rpm"
    if any(i in ("debian", "ubuntu") for i in ids):
        return "deb"
    return ""


def check_level_zero_loader(host_root: str, has_gpu: bool) -> Finding:
    """The host's Level Zero loader (libze_loader.so.1), looked for where each distribution puts it."""
    found = [d for d in LOADER_DIRS if os.path.exists(os.path.join(host_root, d, "libze_loader.so.1"))]
    if found:
        return Finding("ok", "ze-loader", f"libze_loader.so.1 in /{found[0]}")
    if not has_gpu:
        return Finding("skip", "ze-loader", "no Intel GPU here: the host's Level Zero loader is not needed")
    family = os_family(host_root)
    where = ", ".join(f"/{d}" for d in LOADER_DIRS)
    return Finding(
        "warn",
        "ze-loader",
        f"libze_loader.so.1 is in none of {where} (host tools such as xpu-smi and --where host need it)",
        _LOADER_FIX.get(family, "install the Level Zero loader (libze1 / level-zero) from Intel's GPU repository"),
    )


def check_driver_line(host_root: str, has_gpu: bool) -> Finding:
    """The GPU driver line the host's package sources follow: LTS or rolling (Intel's GPU repository)."""
    line = driver_line(host_root)
    if line.startswith("lts/"):
        return Finding(
            "ok",
            "driver-line",
            f"LTS {line[4:]} (Intel's GPU repository): upstream disables event-less submit on LTS (#7670) "
            "and skips its LTS list; say so in bug reports",
        )
    if line == "rolling":
        return Finding("ok", "driver-line", "rolling (Intel's GPU repository): the line upstream's CI tests first")
    if not has_gpu:
        return Finding("skip", "driver-line", "no Intel GPU here")
    return Finding("skip", "driver-line", "no package source names Intel's GPU repository: LTS or rolling is not known")


def host_checks(
    engine_probe: Probe,
    buildkit_probe: Probe,
    sysfs_root: str = "/",
    dev_root: str = "/",
    host_root: str = "/",
    user: gpu.UserIds | None = None,
    disk_path: str = "/",
    free_bytes: int | None = None,
    need_gib: int = SOURCE_BUILD_FREE_GIB,
) -> list[Finding]:
    """Every host finding, in the order they print."""
    return [
        check_engine(engine_probe),
        check_buildkit(buildkit_probe),
        *check_gpus(sysfs_root, dev_root, host_root, user or gpu.UserIds.current()),
        check_level_zero_loader(host_root, gpu.has_intel_gpu(sysfs_root, dev_root)[0]),
        check_driver_line(host_root, gpu.has_intel_gpu(sysfs_root, dev_root)[0]),
        check_disk(disk_path, free_bytes, need_gib),
        check_host_run(),
    ]
