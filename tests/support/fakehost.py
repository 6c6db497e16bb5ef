"""Fake sysfs and /dev trees in a temporary folder, shaped like a real host's.

/sys/class/drm/renderD128 -> /sys/devices/pci0000:00/<slot>/drm/renderD128
.../drm/renderD128/device -> /sys/devices/pci0000:00/<slot>   (vendor, device, driver link)
/dev/dri/renderD128 (a plain file: only its owner and mode matter), /dev/dri/by-path/
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path


@dataclasses.dataclass
class Node:
    device: str = "0x0bd5"
    vendor: str = "0x8086"
    driver: str = "i915"
    slot: str = "0000:3a:00.0"
    mode: int = 0o660
    dev_node: bool = True  # create /dev/dri/renderD*


@dataclasses.dataclass(frozen=True)
class FakeHost:
    sysfs_root: str
    dev_root: str
    host_root: str

    def node_path(self, name: str = "renderD128") -> Path:
        return Path(self.dev_root, "dev/dri", name)

    def node_gid(self, name: str = "renderD128") -> int:
        return self.node_path(name).stat().st_gid


def make_host(root: Path, nodes: list[Node] = (), wsl: bool = False, wsl_libs: bool = True) -> FakeHost:
    sysfs, dev, host = root / "sysfs", root / "devroot", root / "hostroot"
    for d in (sysfs / "sys/class/drm", dev / "dev", host / "usr/lib"):
        d.mkdir(parents=True, exist_ok=True)
    if nodes:
        (dev / "dev/dri/by-path").mkdir(parents=True)
    for i, n in enumerate(nodes):
        name = f"renderD{128 + i}"
        pci = sysfs / "sys/devices/pci0000:00" / n.slot
        pci.mkdir(parents=True, exist_ok=True)
        (pci / "vendor").write_text(n.vendor + "\n")
        (pci / "device").write_text(n.device + "\n")
        if n.driver:
            drv = sysfs / "sys/bus/pci/drivers" / n.driver
            drv.mkdir(parents=True, exist_ok=True)
            (pci / "driver").symlink_to(drv)
        drm = pci / "drm" / name
        drm.mkdir(parents=True)
        (drm / "device").symlink_to(os.path.relpath(pci, drm))
        (sysfs / "sys/class/drm" / name).symlink_to(os.path.relpath(drm, sysfs / "sys/class/drm"))
        if n.dev_node:
            node = dev / "dev/dri" / name
            node.write_text("")
            node.chmod(n.mode)
            (dev / "dev/dri/by-path" / f"pci-{n.slot}-render").symlink_to(f"../{name}")
    if wsl:
        (dev / "dev/dxg").write_text("")
        if wsl_libs:
            (host / "usr/lib/wsl/lib").mkdir(parents=True)
    return FakeHost(str(sysfs), str(dev), str(host))
