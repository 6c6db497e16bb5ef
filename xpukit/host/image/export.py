"""The kit's image as one file for hosts without a registry: clusters with Apptainer or podman.

``docker-archive`` is ``docker save`` (the engine streams it through the docker SDK);
``oci-archive`` is an OCI image layout in a tar, written by skopeo from the engine. Either is
written to a temporary name beside the target and renamed only when complete, so an interrupted
export leaves nothing; ``OUT.json`` (what it is: image id, digests, labels, how to load it) and
``OUT.sha256`` (``sha256sum -c`` format) are written alongside.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xpukit.errors import XpukitError

if TYPE_CHECKING:
    from docker import DockerClient

FORMATS = ("oci-archive", "docker-archive")
LOAD_HINTS = {
    "docker-archive": [
        "docker load -i {out}",
        "podman load -i {out}",
        "apptainer build xpukit.sif docker-archive:{out}",
    ],
    "oci-archive": ["podman load -i {out}", "apptainer build xpukit.sif oci-archive:{out}"],
}
_CHUNK_REPORT = 256 * 1024 * 1024


class ExportError(XpukitError):
    """The image could not be written as an archive."""


def _check_target(out: Path) -> None:
    if out.is_dir():
        raise ExportError(f"{out} is a directory", "give a file name, e.g. xpukit-cpu.tar")
    if not out.parent.is_dir():
        raise ExportError(f"{out.parent} does not exist", f"create it first: mkdir -p {out.parent}")
    if not os.access(out.parent, os.W_OK):
        raise ExportError(f"{out.parent} is not writable", "choose a folder you can write to")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _save_docker_archive(image: Any, reference: str, tmp: Path, say: Callable[[str], None]) -> None:
    written, reported = 0, 0
    # The archive names the image as asked (an image can carry several tags).
    name = reference if reference in (image.tags or []) else True
    with open(tmp, "wb") as f:
        for chunk in image.save(named=name):
            f.write(chunk)
            written += len(chunk)
            if written - reported >= _CHUNK_REPORT:
                reported = written
                say(f"export: {written >> 20} MiB written")


def _skopeo_source(reference: str, image_id: str, kind: str, docker_host: str) -> list[str]:
    """skopeo's arguments naming the image in the engine's store."""
    if kind == "podman":  # podman's own store, by image id (short names resolve differently there)
        return [f"containers-storage:{image_id.removeprefix('sha256:')}"]
    return [*(["--src-daemon-host", docker_host] if docker_host else []), f"docker-daemon:{reference}"]


def _save_oci_archive(reference: str, tmp: Path, source: list[str]) -> str:
    skopeo = shutil.which("skopeo")
    if skopeo is None:
        raise ExportError("--format oci-archive needs skopeo", "apt-get install skopeo, or use --format docker-archive")
    cmd = [skopeo, "copy", "--quiet", *source, f"oci-archive:{tmp}:{reference}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise ExportError(f"skopeo could not write the OCI archive: {last[:160]}", "check the engine and disk space")
    inspect = subprocess.run(
        [skopeo, "inspect", "--format", "{{.Digest}}", f"oci-archive:{tmp}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if inspect.returncode:
        raise ExportError("skopeo cannot read back the OCI archive it wrote", "check disk space and retry")
    return inspect.stdout.strip()


def export_image(
    sdk: DockerClient,
    reference: str,
    fmt: str,
    out: Path,
    docker_host: str = "",
    say: Callable[[str], None] = print,
    kind: str = "docker",
) -> dict[str, Any]:
    """Write ``reference`` as ``fmt`` to ``out``; returns what ``OUT.json`` holds. ``kind``: the
    engine (docker | podman) whose image store skopeo reads for an oci-archive."""
    import docker.errors

    if fmt not in FORMATS:
        raise ExportError(f"unknown --format {fmt!r}", f"use one of: {', '.join(FORMATS)}")
    out = Path(out).absolute()
    _check_target(out)
    try:
        image = sdk.images.get(reference)
    except docker.errors.ImageNotFound:
        raise ExportError(f"image {reference} does not exist on this engine", "build or pull it first") from None
    tmp = out.with_name(f".{out.name}.partial-{os.getpid()}")
    meta_paths = [out.with_name(out.name + ".json"), out.with_name(out.name + ".sha256")]
    try:
        say(f"export: {reference} -> {out} ({fmt})")
        manifest_digest = ""
        if fmt == "docker-archive":
            _save_docker_archive(image, reference, tmp, say)
        else:
            source = _skopeo_source(reference, str(image.id), kind, docker_host)
            manifest_digest = _save_oci_archive(reference, tmp, source)
        digest = _sha256(tmp)
        info: dict[str, Any] = {
            "image": reference,
            "format": fmt,
            "id": image.id,
            "repo_digests": image.attrs.get("RepoDigests") or [],
            "oci_manifest_digest": manifest_digest,
            "archive": out.name,
            "archive_sha256": digest,
            "size": tmp.stat().st_size,
            "labels": {
                k: v for k, v in (image.labels or {}).items() if k.startswith(("io.xpukit.", "org.opencontainers."))
            },
            "load": [h.format(out=out.name) for h in LOAD_HINTS[fmt]],
        }
        os.replace(tmp, out)
        meta_paths[0].write_text(json.dumps(info, indent=2) + "\n")
        meta_paths[1].write_text(f"{digest}  {out.name}\n")
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    say(f"export: wrote {out} ({info['size'] >> 20} MiB), {meta_paths[0].name}, {meta_paths[1].name}")
    return info
