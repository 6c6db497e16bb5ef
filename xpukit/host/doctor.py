"""`invoke doctor`: what works on this host and in an image, one line per finding.

Host checks read sysfs and /dev from roots given as parameters; the engine, BuildKit, disk and
container runs are injected callables, so every check runs in tests without Docker or a GPU.
Each finding says its status (ok / warn / fail / skip), what was found, and the fix.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from typing import Any

from xpukit.errors import XpukitError
from xpukit.host import engine, gpu
from xpukit.host import podman as podman_mod
from xpukit.host.doctor_host import SOURCE_BUILD_FREE_GIB, Probe, check_layer_decompression, host_checks
from xpukit.host.doctor_image import ContainerRunner, ImageUnavailable, in_container_checks
from xpukit.host.findings import Finding


def sdk_runner(docker_client_factory: Callable[[], Any]) -> ContainerRunner:
    """A ContainerRunner on the docker SDK: runs, collects stdout, removes the container."""

    def run(image: str, command: list[str], options: dict[str, Any]) -> tuple[int, str]:
        import docker

        client = docker_client_factory()
        try:
            container = client.containers.create(image, command, detach=True, **options)
        except docker.errors.ImageNotFound:
            raise ImageUnavailable(f"image {image} not found") from None
        except docker.errors.APIError as exc:
            raise ImageUnavailable(f"cannot start {image}: {exc.explanation or exc}") from None
        try:
            try:
                container.start()
            except docker.errors.APIError as exc:
                explained = podman_mod.explain_start_failure(str(exc))
                why = explained.one_line() if explained else (exc.explanation or str(exc))
                raise ImageUnavailable(f"cannot start {image}: {why}") from None
            code = int(container.wait().get("StatusCode", 1))
            stdout = container.logs(stdout=True, stderr=False).decode(errors="replace")
            return code, stdout
        finally:
            container.remove(force=True)

    return run


def _sdk_engine_probe(docker_client_factory: Callable[[], Any]) -> Probe:
    def probe() -> tuple[bool, str]:
        try:
            client = docker_client_factory()
            info = client.version()
            podman = any("podman" in str(c.get("Name", "")).lower() for c in info.get("Components") or [])
            version = f"{'podman' if podman else 'Docker'} {info.get('Version', '?')}"
        except Exception as exc:
            text = getattr(exc, "message", "") or str(exc)
            return False, text.strip().splitlines()[0] if text.strip() else type(exc).__name__
        return True, version

    return probe


def _default_buildkit_probe() -> tuple[bool, str]:
    try:
        cli = engine.pick_cli()
    except XpukitError as exc:
        return False, exc.message
    how = "buildx plugin" if cli.via_buildx else "DOCKER_BUILDKIT=1"
    return True, f"BuildKit through {cli.path} {cli.version} ({how})"


def _free_bytes(path: str) -> int | None:
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def run_doctor(
    image: str | None,
    docker_client_factory: Callable[[], Any],
    sysfs_root: str = "/",
    dev_root: str = "/",
    host_root: str = "/",
    *,
    user: gpu.UserIds | None = None,
    engine_probe: Probe | None = None,
    buildkit_probe: Probe | None = None,
    runner: ContainerRunner | None = None,
    disk_path: str | None = None,
    free_bytes: int | None = None,
    need_gib: int = SOURCE_BUILD_FREE_GIB,
    expected_pins: Mapping[str, str] | None = None,
    shm_size: str = gpu.DEFAULT_SHM_SIZE,
    out: Callable[[str], None] = print,
    engine_kind: tuple[str, bool] = ("docker", False),
    engine_options: Mapping[str, Any] | None = None,
    engine_endpoint: str = "",
) -> int:
    """Print every finding, one per line; return 1 when any failed, else 0.

    ``docker_client_factory`` returns a docker SDK client (it may raise when no engine answers).
    ``engine_probe``/``buildkit_probe``/``runner``/``free_bytes`` replace the real ones in tests.
    ``expected_pins``: the host's pins for the image's profile, flat like the manifest's "pins".
    ``engine_kind`` (kind, rootless) and ``engine_options``: the engine's terms for the GPU
    options and what its containers need (xpukit.host.engine.Engine.run_options).
    ``engine_endpoint``: the engine's API address ("" for the local default).
    """
    engine_probe = engine_probe or _sdk_engine_probe(docker_client_factory)
    buildkit_probe = buildkit_probe or _default_buildkit_probe
    engine_ok, engine_why = engine_probe()
    if disk_path is None:
        disk_path = "/var/lib/docker" if os.path.isdir(os.path.join(host_root, "var/lib/docker")) else "/"
    if free_bytes is None:
        free_bytes = _free_bytes(os.path.join(host_root, disk_path.lstrip("/")))

    findings = host_checks(
        lambda: (engine_ok, engine_why),
        buildkit_probe,
        sysfs_root,
        dev_root,
        host_root,
        user,
        disk_path,
        free_bytes,
        need_gib,
    )
    findings.append(check_layer_decompression(engine_kind[0], engine_endpoint))
    for f in findings:
        out(f.line())

    if image:
        if not engine_ok:
            extra = [Finding("skip", "image", f"in-container checks of {image} need an engine")]
        else:
            host_has_gpu, _ = gpu.has_intel_gpu(sysfs_root, dev_root)
            found = gpu.gpu_run_options(sysfs_root, dev_root, host_root, shm_size=shm_size).for_engine(*engine_kind)
            options = {**found.docker_kwargs(), **(engine_options or {})}
            extra = in_container_checks(
                image, runner or sdk_runner(docker_client_factory), options, host_has_gpu, expected_pins
            )
        for f in extra:
            out(f.line())
        findings += extra
    else:
        out(Finding("skip", "image", "no image given: in-container checks skipped (invoke doctor --image NAME)").line())

    failed = [f for f in findings if f.status == "fail"]
    warned = [f for f in findings if f.status == "warn"]
    out(f"doctor: {len(failed)} failed, {len(warned)} warnings, {len(findings)} checks")
    return 1 if failed else 0
