"""`invoke verify`'s comparison: images read from docker-archives, layer by layer and file by file,
with the Dockerfile step that made each differing layer and ``diffoscope`` on the first differing files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import shutil
import subprocess
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from xpukit.errors import XpukitError

# Files shown through diffoscope, and the largest one it is given (bigger ones: their digests only).
DIFFOSCOPE_FILES = 3
DIFFOSCOPE_MAX_BYTES = 32 << 20
REPORT_LINES = 40
LISTED_FILES = 20


@dataclasses.dataclass
class Image:
    """An image as a docker-archive: its config and its layer tars, in order."""

    name: str
    archive: Path
    config: dict[str, Any]
    layers: list[str]  # member names of the layer tars in the archive
    image_id: str = ""  # as its engine or store names it ("" = the digest of the archive's config)

    @property
    def diff_ids(self) -> list[str]:
        return list(self.config.get("rootfs", {}).get("diff_ids", []))

    def steps(self) -> list[str]:
        """The Dockerfile step that made each layer (history entries that added one)."""
        made = [h.get("created_by", "") for h in self.config.get("history", []) if not h.get("empty_layer")]
        return made if len(made) == len(self.diff_ids) else [""] * len(self.diff_ids)

    @contextlib.contextmanager
    def layer(self, index: int) -> Iterator[tarfile.TarFile]:
        with tarfile.open(self.archive) as outer:
            member = outer.extractfile(self.layers[index])
            if member is None:
                raise XpukitError(f"{self.name}: layer {index} is missing from its archive", "rerun verify")
            with tarfile.open(fileobj=member, mode="r|*") as inner:
                yield inner


def read_archive(name: str, archive: Path) -> Image:
    with tarfile.open(archive) as tar:
        manifest = json.load(_member(tar, "manifest.json"))[0]
        config = json.load(_member(tar, manifest["Config"]))
    return Image(name, archive, config, list(manifest["Layers"]))


def _member(tar: tarfile.TarFile, name: str) -> IO[bytes]:
    found = tar.extractfile(name)
    if found is None:
        raise XpukitError(f"{name} is missing from an image archive", "rerun verify")
    return found


# ------------------------------------------------------------------------------ comparing


@dataclasses.dataclass(frozen=True)
class Entry:
    kind: str  # file | dir | link | hardlink | other
    mode: int
    owner: str
    mtime: int
    size: int
    target: str
    sha256: str


def index_layer(layer: tarfile.TarFile) -> dict[str, Entry]:
    """Every path in a layer tar with its metadata and content digest (streamed; nothing written)."""
    out = {}
    for m in layer:
        digest = ""
        if m.isfile():
            data = layer.extractfile(m)
            h = hashlib.sha256()
            if data is not None:
                for chunk in iter(functools.partial(data.read, 1 << 20), b""):
                    h.update(chunk)
            digest = h.hexdigest()
        kind = (
            "file"
            if m.isfile()
            else "dir"
            if m.isdir()
            else "link"
            if m.issym()
            else "hardlink"
            if m.islnk()
            else "other"
        )
        out[m.name.removeprefix("./")] = Entry(
            kind, m.mode, f"{m.uid}:{m.gid}", int(m.mtime), m.size, m.linkname, digest
        )
    return out


def how_entries_differ(a: Entry | None, b: Entry | None) -> str:
    if a is None or b is None:
        return "only in the rebuild" if a is None else "only in the reference"
    parts = []
    if a.kind != b.kind:
        parts.append(
            f"{a.kind} vs {b.kind}" + (f" (-> {a.target or b.target})" if "hardlink" in (a.kind, b.kind) else "")
        )
    elif a.sha256 != b.sha256:
        parts.append(f"content ({a.size} vs {b.size} bytes)")
    elif a.target != b.target:
        parts.append(f"link target {a.target} vs {b.target}")
    if a.mtime != b.mtime:
        parts.append(f"mtime {a.mtime} vs {b.mtime}")
    if a.mode != b.mode:
        parts.append(f"mode {a.mode:o} vs {b.mode:o}")
    if a.owner != b.owner:
        parts.append(f"owner {a.owner} vs {b.owner}")
    return ", ".join(parts) or "tar header"


def differing_files(ref: dict[str, Entry], new: dict[str, Entry]) -> list[tuple[str, str]]:
    return [
        (path, how_entries_differ(ref.get(path), new.get(path)))
        for path in sorted(set(ref) | set(new))
        if ref.get(path) != new.get(path)
    ]


def config_differences(ref: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Top-level config keys (and config.* keys) whose values differ, layers aside."""
    out = []
    for key in sorted(set(ref) | set(new)):
        if key == "rootfs":
            continue
        if key == "config" and isinstance(ref.get(key), dict) and isinstance(new.get(key), dict):
            out += [f"config.{k}" for k in sorted(set(ref[key]) | set(new[key])) if ref[key].get(k) != new[key].get(k)]
        elif ref.get(key) != new.get(key):
            out.append(key)
    return out


def _extract(image: Image, index: int, paths: set[str], dest: Path) -> dict[str, Path]:
    """The regular files ``paths`` of one layer, written under ``dest``."""
    found = {}
    with image.layer(index) as layer:
        for m in layer:
            name = m.name.removeprefix("./")
            if name in paths and m.isfile() and m.size <= DIFFOSCOPE_MAX_BYTES:
                target = dest / hashlib.sha256(name.encode()).hexdigest()[:16] / Path(name).name
                target.parent.mkdir(parents=True, exist_ok=True)
                data = layer.extractfile(m)
                if data is not None:
                    with open(target, "wb") as f:
                        shutil.copyfileobj(data, f)
                    found[name] = target
    return found


def diffoscope_report(a: Path, b: Path, say: Callable[[str], None]) -> None:
    tool = shutil.which("diffoscope")
    if tool is None:
        say("    (install diffoscope to see how: apt-get install diffoscope-minimal)")
        return
    out = subprocess.run(
        [tool, "--no-progress", "--text", "-", "--max-text-report-size", "20000", str(a), str(b)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = out.stdout.splitlines()
    for line in lines[:REPORT_LINES]:
        say("    " + line)
    if len(lines) > REPORT_LINES:
        say(f"    ... ({len(lines) - REPORT_LINES} more lines of diffoscope's report)")


def describe_step(created_by: str, limit: int = 110) -> str:
    """A history entry as the Dockerfile step it was: buildah writes a RUN as ``|N ARG=value...
    /bin/sh -c COMMAND`` and other steps as ``/bin/sh -c #(nop) COPY ...``."""
    text = " ".join(created_by.split())
    if not text:
        return "(step unknown)"
    marker = "/bin/sh -c "
    if marker in text:
        text = text[text.index(marker) + len(marker) :]
        text = text.removeprefix("#(nop) ") if text.startswith("#(nop) ") else "RUN " + text
    return text if len(text) <= limit else text[: limit - 3] + "..."


def compare(reference: Image, rebuilt: Image, work: Path, say: Callable[[str], None]) -> bool:
    """True when the two images are identical; otherwise say what differs, layer by layer."""
    if reference.diff_ids == rebuilt.diff_ids and reference.config == rebuilt.config:
        return True
    ref_ids, new_ids, steps = reference.diff_ids, rebuilt.diff_ids, rebuilt.steps()
    if len(ref_ids) != len(new_ids):
        say(f"verify: {reference.name} has {len(ref_ids)} layers, the rebuild {len(new_ids)}")
    shown = 0
    for index in range(min(len(ref_ids), len(new_ids))):
        if ref_ids[index] == new_ids[index]:
            continue
        step = describe_step(steps[index])
        say(f"verify: layer {index + 1} differs: {step}")
        with reference.layer(index) as layer:
            ref_index = index_layer(layer)
        with rebuilt.layer(index) as layer:
            new_index = index_layer(layer)
        files = differing_files(ref_index, new_index)
        dates = [path for path, how in files if how.startswith("mtime ") and "," not in how]
        if dates:
            say(f"  {len(dates)} of the {len(files)} paths differ only in mtime (another SOURCE_DATE_EPOCH?)")
            files = [f for f in files if f[0] not in set(dates)] + [f for f in files if f[0] in set(dates)]
        for path, how in files[:LISTED_FILES]:
            say(f"  /{path}: {how}")
        if len(files) > LISTED_FILES:
            say(f"  ... and {len(files) - LISTED_FILES} more files")
        contents = [
            p for p, _ in files if (a := ref_index.get(p)) and (b := new_index.get(p)) and a.sha256 != b.sha256
        ][:DIFFOSCOPE_FILES]
        if contents and shown < DIFFOSCOPE_FILES:
            ref_files = _extract(reference, index, set(contents), work / f"ref-{index}")
            new_files = _extract(rebuilt, index, set(contents), work / f"new-{index}")
            for path in contents:
                if path in ref_files and path in new_files and shown < DIFFOSCOPE_FILES:
                    say(f"  diffoscope /{path}:")
                    diffoscope_report(ref_files[path], new_files[path], say)
                    shown += 1
    if ref_ids == new_ids:
        keys = config_differences(reference.config, rebuilt.config)
        say(f"verify: every layer is identical; the image config differs in {', '.join(keys) or 'its encoding'}")
    return False


# ------------------------------------------------------------------------------ the task


def config_bytes(image: Image) -> bytes:
    with tarfile.open(image.archive) as tar:
        manifest = json.load(_member(tar, "manifest.json"))[0]
        return _member(tar, manifest["Config"]).read()
