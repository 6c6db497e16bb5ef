"""What the image's venv leaves out, so every pull moves less (scripts/install-python.sh; an optional
layer's additions, e.g. the dpnp image's, by scripts/install-layer.sh).

These read the real installed venv inside the image: no duplicate copies of large files, no DWARF
in shared objects, bytecode that checks its source's hash (never a build's timestamp), and Triton
with its Intel backend only. CI runs them in the default image and in the dpnp image.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from importlib import metadata
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from xpukit import layout
from xpukit.host.versions import lock, pins

pytestmark = pytest.mark.container

VENV = Path(os.environ.get("VIRTUAL_ENV", sys.prefix))
LARGE = 1 << 20


def _regular_files(root: Path):
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            yield path


def test_identical_large_files_share_one_inode():
    by_content: dict[tuple[int, str], set[int]] = {}
    for path in _regular_files(VENV):
        stat = path.stat()
        if stat.st_size < LARGE:
            continue
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        by_content.setdefault((stat.st_size, digest), set()).add(stat.st_ino)
    copies = {key: inodes for key, inodes in by_content.items() if len(inodes) > 1}
    assert by_content, f"no file of 1 MiB or more under {VENV}: is this the kit's venv?"
    assert not copies, f"identical files stored more than once: {copies}"


def test_shared_objects_carry_no_dwarf():
    objects = [p for p in _regular_files(VENV) if ".so" in p.name and p.stat().st_size >= LARGE]
    assert any(p.name.startswith("libtriton") for p in objects), "libtriton.so not found"
    with_dwarf = []
    for path in objects:
        with path.open("rb") as f:
            if f.read(4) != b"\x7fELF":
                continue
            f.seek(0)
            if ELFFile(f).get_section_by_name(".debug_info") is not None:
                with_dwarf.append(str(path))
    assert not with_dwarf


def test_bytecode_checks_its_sources_hash():
    """pip stamps the .pyc files it writes with each source's extraction time (a rebuild differs);
    the build rewrites every one with --invalidation-mode checked-hash (PEP 552 flags 0b11)."""
    stamped = []
    count = 0
    for path in VENV.rglob("*.pyc"):
        count += 1
        with path.open("rb") as f:
            flags = int.from_bytes(f.read(8)[4:8], "little")
        if flags != 0b11:
            stamped.append(str(path))
    assert count, f"no .pyc under {VENV}"
    assert not stamped, f"{len(stamped)} .pyc files not hash-checked: {stamped[:5]}"


@pytest.mark.sharing_smoke
def test_triton_has_only_its_intel_backend_and_the_kits_driver_folder():
    from triton.backends import backends

    assert set(backends) == {"intel", "xpukit"}
    backend_dir = Path(sys.modules["triton.backends"].__file__).parent
    names = sorted(p.name for p in backend_dir.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert names == ["intel", "xpukit"]


def test_an_optional_layer_is_in_its_own_image_only():
    """An optional layer's own packages (those its lock, env/lock/<profile>-<layer>.txt, adds to the
    profile's: dpnp, dpctl, oneMKL, the SYCL runtime...) are all installed where the image carries
    that layer's lock (the build copies it to env/requirements-<layer>.lock), and none of them
    anywhere else: the layer is a stage after the default image, which it must not grow."""
    image_locks = Path(layout.INSTALL_ROOT) / "env"
    profile = json.loads(Path(layout.MANIFEST).read_text())["profile"]
    installed = {lock.normalise(d.metadata["Name"]): d.version for d in metadata.distributions()}
    base = lock.locked_versions(image_locks / "requirements.lock")
    layers = [name for name, table in pins.load().layers.items() if table["profile"] == profile]
    checked = 0
    for name in layers:
        in_image = image_locks / f"requirements-{name}.lock"
        layer_lock = in_image if in_image.exists() else pins.layer_lock_path(profile, name)
        if not layer_lock.exists():  # the kit's baked-in sources carry no lock files
            continue
        own = {k: v for k, v in lock.locked_versions(layer_lock).items() if k not in base}
        assert own, f"{name}'s lock adds nothing to {profile}'s"
        if in_image.exists():
            assert {k: installed.get(k) for k in own} == own, f"the {name} image lacks some of its layer"
        else:
            assert not set(own) & set(installed), f"{name}'s packages in an image without the {name} layer"
        checked += 1
    if not checked:
        pytest.skip(f"no optional layer's lock for the {profile} profile here")
