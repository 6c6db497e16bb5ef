"""Intel GPUs on the host, and the `docker run` options that pass them into a container.

Detection reads only sysfs and /dev, both from roots given as parameters (default "/"), so the
tests can build fake trees in a temporary folder. Options are returned in two forms with one
meaning: docker-SDK keyword arguments and the equivalent `docker run` flags (for --dry-run).
"""

from __future__ import annotations

import dataclasses
import os
import stat
from pathlib import Path
from typing import Any

from xpukit.errors import XpukitError

INTEL_VENDOR_ID = "8086"
DEFAULT_SHM_SIZE = "8g"

# PCI device id -> (family, model). Ids from the Linux kernel's include/drm/intel/pciids.h; model
# names only where the PCI id database (pci.ids) gives one. Unknown ids print as "Intel GPU <id>".
_PVC = "Ponte Vecchio (Data Center GPU Max)"
PCI_MODELS: dict[str, tuple[str, str]] = {
    "0bd0": ("pvc", "Ponte Vecchio XL (2 tile)"),
    "0bd5": ("pvc", "Data Center GPU Max 1550"),
    "0bd6": ("pvc", "Data Center GPU Max 1550"),
    "0bd7": ("pvc", "Data Center GPU Max 1350"),
    "0bd8": ("pvc", "Data Center GPU Max 1350"),
    "0bd9": ("pvc", "Data Center GPU Max 1100"),
    "0bda": ("pvc", "Data Center GPU Max 1100"),
    "0bdb": ("pvc", "Data Center GPU Max 1100"),
    "0b69": ("pvc", _PVC),
    "0b6e": ("pvc", _PVC),
    "0bd4": ("pvc", _PVC),
    "56a0": ("dg2", "Arc A770 (DG2)"),
    "56a1": ("dg2", "Arc A750 (DG2)"),
    "56a5": ("dg2", "Arc A380 (DG2)"),
    "e202": ("bmg", "Battlemage (BMG-G21)"),
    "e20b": ("bmg", "Battlemage (BMG-G21)"),
    "e20c": ("bmg", "Battlemage (BMG-G21)"),
    "e20d": ("bmg", "Battlemage (BMG-G21)"),
    "e212": ("bmg", "Battlemage (BMG-G21)"),
    "7d40": ("mtl", "Meteor Lake integrated GPU"),
    "7d45": ("mtl", "Meteor Lake integrated GPU"),
    "7d55": ("mtl", "Meteor Lake integrated GPU"),
    "7d60": ("mtl", "Meteor Lake integrated GPU"),
    "7dd5": ("mtl", "Meteor Lake integrated GPU"),
    "6420": ("lnl", "Lunar Lake integrated GPU"),
    "64a0": ("lnl", "Lunar Lake integrated GPU"),
    "64b0": ("lnl", "Lunar Lake integrated GPU"),
}


class NoIntelGpuError(XpukitError):
    """GPU passthrough was required but the host shows no Intel GPU."""


@dataclasses.dataclass(frozen=True)
class UserIds:
    """Who would open the device: a uid and every gid the user holds."""

    uid: int
    gids: frozenset[int]

    @classmethod
    def current(cls) -> UserIds:
        return cls(os.getuid(), frozenset({os.getgid(), *os.getgroups()}))


@dataclasses.dataclass(frozen=True)
class RenderNode:
    """One /dev/dri/renderD* node and the PCI device behind it."""

    name: str  # "renderD128"
    dev_path: str  # the host path, e.g. "/dev/dri/renderD128" (never the fake test root)
    vendor: str  # "8086"
    device: str  # "0bd5"
    driver: str  # "i915", "xe", or "" when no driver is bound
    pci_slot: str  # "0000:3a:00.0", or "" when sysfs does not say
    exists: bool  # the node exists under /dev
    uid: int | None
    gid: int | None
    mode: int | None  # permission bits of the node

    @property
    def is_intel(self) -> bool:
        return self.vendor == INTEL_VENDOR_ID

    @property
    def family(self) -> str:
        return PCI_MODELS.get(self.device, ("", ""))[0]

    @property
    def model(self) -> str:
        return PCI_MODELS.get(self.device, ("", f"Intel GPU {self.device}"))[1]

    def accessible_by(self, user: UserIds) -> bool:
        """Read+write access from the mode bits, as the kernel decides it (root always passes)."""
        if not self.exists or self.mode is None:
            return False
        return can_read_write(self.mode, self.uid, self.gid, user)

    def describe(self) -> str:
        ids = f"{self.vendor}:{self.device}"
        driver = f"driver {self.driver}" if self.driver else "no driver bound"
        return f"{self.name} {self.model} ({ids}, {driver}{', ' + self.pci_slot if self.pci_slot else ''})"


def can_read_write(mode: int, uid: int | None, gid: int | None, user: UserIds) -> bool:
    """Whether ``user`` may open a node with these owner/group/mode for read and write.

    Computed, not tried: tests run as root (open() always succeeds) and in containers as a user.
    """
    if user.uid == 0:
        return True
    if uid is not None and user.uid == uid:
        need = stat.S_IRUSR | stat.S_IWUSR
    elif gid is not None and gid in user.gids:
        need = stat.S_IRGRP | stat.S_IWGRP
    else:
        need = stat.S_IROTH | stat.S_IWOTH
    return mode & need == need


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _hex_id(raw: str) -> str:
    return raw.lower().removeprefix("0x").zfill(4) if raw else ""


def render_nodes(sysfs_root: str = "/", dev_root: str = "/") -> list[RenderNode]:
    """Every DRM render node sysfs knows (any vendor), with its /dev node's owner and mode."""
    drm = Path(sysfs_root, "sys/class/drm")
    if not drm.is_dir():
        return []
    nodes = []
    for entry in sorted(drm.glob("renderD*"), key=lambda p: (len(p.name), p.name)):
        device = entry / "device"
        driver = os.readlink(device / "driver") if (device / "driver").is_symlink() else ""
        slot = Path(os.path.realpath(device)).name if device.exists() else ""
        dev = Path(dev_root, "dev/dri", entry.name)
        try:
            st = dev.stat()
            owner: tuple[int | None, int | None, int | None] = (
                st.st_uid,
                st.st_gid,
                stat.S_IMODE(st.st_mode),
            )
        except OSError:
            owner = (None, None, None)
        nodes.append(
            RenderNode(
                name=entry.name,
                dev_path=f"/dev/dri/{entry.name}",
                vendor=_hex_id(_read(device / "vendor")),
                device=_hex_id(_read(device / "device")),
                driver=os.path.basename(driver),
                pci_slot=slot if ":" in slot else "",
                exists=owner[2] is not None,
                uid=owner[0],
                gid=owner[1],
                mode=owner[2],
            )
        )
    return nodes


def intel_render_nodes(sysfs_root: str = "/", dev_root: str = "/") -> list[RenderNode]:
    return [n for n in render_nodes(sysfs_root, dev_root) if n.is_intel]


@dataclasses.dataclass(frozen=True)
class WslInfo:
    """WSL2's GPU paravirtualization: /dev/dxg and the host's user-mode libraries."""

    dxg: bool
    lib_dir: bool  # /usr/lib/wsl exists

    @property
    def detected(self) -> bool:
        return self.dxg


def detect_wsl(dev_root: str = "/", host_root: str = "/") -> WslInfo:
    return WslInfo(
        dxg=Path(dev_root, "dev/dxg").exists(),
        lib_dir=Path(host_root, "usr/lib/wsl").is_dir(),
    )


def has_intel_gpu(sysfs_root: str = "/", dev_root: str = "/") -> tuple[bool, str]:
    """Whether the host has an Intel GPU render node, and the reason, for ``--profile auto``."""
    nodes = render_nodes(sysfs_root, dev_root)
    intel = [n for n in nodes if n.is_intel]
    present = [n for n in intel if n.exists]
    if present:
        n = present[0]
        driver = f"driver {n.driver}" if n.driver else "no driver bound"
        more = f" (+{len(present) - 1} more)" if len(present) > 1 else ""
        return True, f"{n.name} is an Intel GPU ({n.vendor}:{n.device}, {driver}){more}"
    if intel:
        return False, f"sysfs lists Intel GPU {intel[0].name} but {intel[0].dev_path} does not exist"
    if detect_wsl(dev_root, dev_root).dxg:
        return False, (
            "WSL GPU paravirtualization (/dev/dxg) found, but its vendor is not visible in sysfs; "
            "pass --profile xpu if it is an Intel GPU"
        )
    if nodes:
        vendors = ", ".join(sorted({f"{n.name} {n.vendor}:{n.device}" for n in nodes}))
        return False, f"no Intel render node (found {vendors})"
    return False, "no DRM render node (/sys/class/drm/renderD*) on this host"


@dataclasses.dataclass(frozen=True)
class GpuRunOptions:
    """Container options for GPU passthrough, with notes on what was (not) found."""

    devices: tuple[str, ...] = ()
    volumes: tuple[tuple[str, str, str], ...] = ()  # (host, container, mode)
    group_add: tuple[str, ...] = ()
    shm_size: str = DEFAULT_SHM_SIZE
    notes: tuple[str, ...] = ()

    @property
    def passthrough(self) -> bool:
        return bool(self.devices)

    def docker_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``docker.containers.create/run`` (the docker SDK)."""
        kwargs: dict[str, Any] = {"shm_size": self.shm_size}
        if self.devices:
            kwargs["devices"] = [f"{d}:{d}:rwm" for d in self.devices]
        if self.volumes:
            kwargs["volumes"] = {h: {"bind": c, "mode": m} for h, c, m in self.volumes}
        if self.group_add:
            kwargs["group_add"] = list(self.group_add)
        return kwargs

    def for_engine(self, kind: str, rootless: bool) -> GpuRunOptions:
        """The options as ``kind`` takes them. Rootless podman cannot add a host group by number
        (the container's groups are mapped ones): ``keep-groups`` keeps the caller's own groups,
        the render group among them, instead (it needs the crun runtime)."""
        if kind == "podman" and rootless and self.group_add:
            note = "rootless podman: --group-add keep-groups (the caller's own groups) instead of the render gid"
            return dataclasses.replace(self, group_add=("keep-groups",), notes=(*self.notes, note))
        return self

    def cli_flags(self) -> list[str]:
        """The same options as `docker run` flags."""
        flags: list[str] = []
        for d in self.devices:
            flags += ["--device", d]
        for h, c, m in self.volumes:
            flags += ["-v", f"{h}:{c}:{m}"]
        for g in self.group_add:
            flags += ["--group-add", g]
        return [*flags, "--shm-size", self.shm_size]


def gpu_run_options(
    sysfs_root: str = "/",
    dev_root: str = "/",
    host_root: str = "/",
    shm_size: str = DEFAULT_SHM_SIZE,
    require: bool = False,
) -> GpuRunOptions:
    """Options that give a container the host's Intel GPUs (or WSL's /dev/dxg).

    ``require``: raise :class:`NoIntelGpuError` instead of returning options without devices.
    """
    nodes = [n for n in intel_render_nodes(sysfs_root, dev_root) if n.exists]
    wsl = detect_wsl(dev_root, host_root)
    devices: list[str] = []
    volumes: list[tuple[str, str, str]] = []
    groups: list[str] = []
    notes: list[str] = []
    if nodes:
        devices.append("/dev/dri")
        # --device skips the by-path symlinks, which Level Zero and sycl-ls use to map PCI slots.
        if Path(dev_root, "dev/dri/by-path").is_dir():
            volumes.append(("/dev/dri/by-path", "/dev/dri/by-path", "ro"))
        for n in nodes:
            # Group 0 would hand the container's user root's group: never add it.
            if n.gid and str(n.gid) not in groups:
                groups.append(str(n.gid))
        if not groups:
            notes.append("the render nodes belong to group 0 (root): a non-root container user may not open them")
        notes.append("passing through " + ", ".join(n.describe() for n in nodes))
    if wsl.dxg:
        devices.append("/dev/dxg")
        if wsl.lib_dir:
            volumes.append(("/usr/lib/wsl", "/usr/lib/wsl", "ro"))
        else:
            notes.append("WSL: /dev/dxg found but /usr/lib/wsl is missing (GPU user-mode libraries)")
        notes.append("WSL detected: passing through /dev/dxg")
    if not devices:
        _, why = has_intel_gpu(sysfs_root, dev_root)
        if require:
            raise NoIntelGpuError(
                f"no Intel GPU to pass through: {why}",
                "run on a host with an Intel GPU (i915 or xe driver loaded), or use --profile cpu",
            )
        notes.append(f"no GPU passthrough: {why}")
    return GpuRunOptions(tuple(devices), tuple(volumes), tuple(groups), shm_size, tuple(notes))
