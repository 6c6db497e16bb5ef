"""The image as a file for registry-less clusters: docker-archive and oci-archive from a real
engine, loaded back into a second, empty engine (docker-archive) and read by skopeo (OCI)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess

import pytest

from tests.support.services import need, second_engine
from xpukit.host.image import export

IMAGE = "xpukit-base:bookworm-slim"  # small, and present wherever `invoke base` ran


@pytest.fixture(scope="module")
def small_image(docker_client) -> str:
    try:
        docker_client.images.get(IMAGE)
    except Exception:
        pytest.skip("needs the local base image (invoke base)")
    return IMAGE


def _check_sidecars(out):
    info = json.loads(out.with_name(out.name + ".json").read_text())
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    assert info["archive_sha256"] == digest
    assert out.with_name(out.name + ".sha256").read_text() == f"{digest}  {out.name}\n"
    assert not [p for p in out.parent.iterdir() if ".partial-" in p.name]
    return info


@pytest.mark.docker
def test_docker_archive_loads_into_an_empty_engine(docker_client, small_image, tmp_path):
    import docker

    out = tmp_path / "xpukit.tar"
    info = export.export_image(docker_client, small_image, "docker-archive", out, say=lambda _m: None)
    assert _check_sidecars(out)["id"] == docker_client.images.get(small_image).id
    assert "docker load -i xpukit.tar" in info["load"]
    with second_engine(tmp_path / "engine-b") as host_b:
        b = docker.DockerClient(base_url=host_b, timeout=600)
        try:
            with open(out, "rb") as f:
                (loaded,) = b.images.load(f.read())
            assert loaded.id == info["id"]
            assert small_image in loaded.tags
        finally:
            b.close()


@pytest.mark.docker
def test_oci_archive_is_readable_by_skopeo(docker_client, small_image, tmp_path):
    import os

    skopeo = need("skopeo", "skopeo")
    out = tmp_path / "xpukit.oci.tar"
    info = export.export_image(
        docker_client,
        small_image,
        "oci-archive",
        out,
        docker_host=os.environ.get("DOCKER_HOST", ""),
        say=lambda _m: None,
    )
    _check_sidecars(out)
    seen = subprocess.run([skopeo, "inspect", f"oci-archive:{out}"], capture_output=True, text=True, check=True)
    assert json.loads(seen.stdout)["Digest"] == info["oci_manifest_digest"]


@pytest.mark.docker
def test_bad_targets_and_formats(docker_client, small_image, tmp_path):
    with pytest.raises(export.ExportError, match="unknown --format"):
        export.export_image(docker_client, small_image, "sif", tmp_path / "x")
    with pytest.raises(export.ExportError, match="is a directory"):
        export.export_image(docker_client, small_image, "docker-archive", tmp_path)
    with pytest.raises(export.ExportError, match="does not exist"):
        export.export_image(docker_client, small_image, "docker-archive", tmp_path / "no" / "x.tar")
    with pytest.raises(export.ExportError, match="does not exist on this engine"):
        export.export_image(docker_client, "xpukit:never-built", "docker-archive", tmp_path / "x.tar")


@pytest.mark.docker
def test_interrupted_export_leaves_nothing(docker_client, small_image, tmp_path, monkeypatch):
    out = tmp_path / "x.tar"
    monkeypatch.setattr(export, "_CHUNK_REPORT", 1)  # report on every chunk, so the interrupt lands mid-stream

    def interrupt(message):
        if "MiB written" in message:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        export.export_image(docker_client, small_image, "docker-archive", out, say=interrupt)
    assert list(tmp_path.iterdir()) == []
    assert shutil.disk_usage(tmp_path)  # the folder itself is still usable
