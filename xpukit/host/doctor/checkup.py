"""`invoke doctor`: what works on this host and in an image, one line per finding.

Host checks read sysfs and /dev from roots given as parameters; the engine, BuildKit, disk and
container runs are injected callables, so every check runs in tests without Docker or a GPU.
Each finding says its status (ok / warn / fail / skip), what was found, and the fix.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import shutil
from collections.abc import Callable, Mapping
from typing import Any

from xpukit.host import engine, gpu, processes
from xpukit.host.doctor.findings import Finding
from xpukit.host.doctor.host import SOURCE_BUILD_FREE_GIB, Probe, check_layer_decompression, host_checks
from xpukit.host.doctor.image import (
    PROBE_COMMAND,
    ContainerRunner,
    ImageUnavailable,
    in_container_checks,
    parse_probe_output,
)
from xpukit.runtime.image import fingerprint
from xpukit.runtime.image.doctor_probe import driver_line


def engine_runner(eng: engine.Engine) -> ContainerRunner:
    """A ContainerRunner on the task's engine: runs, collects stdout, removes the container."""

    def run(image: str, command: list[str], options: dict[str, Any]) -> tuple[int, str]:
        try:
            return eng.run_collecting(image, command, options)
        except processes.ContainerUnavailable as exc:
            raise ImageUnavailable(str(exc)) from None

    return run


def _free_bytes(path: str) -> int | None:
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


@dataclasses.dataclass(frozen=True)
class DoctorOptions:
    """What one ``invoke doctor`` looks at, built by name (tests inject every probe).

    ``eng``: the task's engine, which answers the engine and builder probes and runs the image's
    probe; ``engine_probe``/``buildkit_probe``/``runner``/``free_bytes`` replace them in tests
    (``eng`` None: every one of them is given).
    ``expected_pins``: the host's pins for the image's profile, flat like the manifest's "pins".
    ``engine_kind`` (kind, rootless) and ``engine_options``: the engine's terms for the GPU
    options and what its containers need (xpukit.host.engine.Engine.run_options).
    ``engine_endpoint``: the engine's API address ("" for the local default).
    ``report``: print the bug-report fingerprint (xpukit.host.doctor.fingerprint) instead of findings.
    """

    image: str | None = None
    eng: engine.Engine | None = None
    sysfs_root: str = "/"
    dev_root: str = "/"
    host_root: str = "/"
    user: gpu.UserIds | None = None
    engine_probe: Probe | None = None
    buildkit_probe: Probe | None = None
    runner: ContainerRunner | None = None
    disk_path: str | None = None
    free_bytes: int | None = None
    need_gib: int = SOURCE_BUILD_FREE_GIB
    expected_pins: Mapping[str, str] | None = None
    shm_size: str = gpu.DEFAULT_SHM_SIZE
    engine_kind: tuple[str, bool] = ("docker", False)
    engine_options: Mapping[str, Any] | None = None
    engine_endpoint: str = ""
    report: bool = False


def host_facts(sysfs_root: str = "/", dev_root: str = "/", host_root: str = "/") -> dict[str, str]:
    """The report's fields the host answers: its GPUs, kernel driver and line, and kernel."""
    nodes = [n for n in gpu.intel_render_nodes(sysfs_root, dev_root) if n.exists]
    wsl = gpu.detect_wsl(dev_root, host_root)
    gpus = "; ".join(f"{n.model} ({n.vendor}:{n.device})" for n in nodes)
    if not gpus and wsl.detected:
        gpus = "WSL2 paravirtualized GPU (/dev/dxg)"
    drivers = ", ".join(sorted({n.driver for n in nodes if n.driver}))
    line = driver_line(host_root)
    return {
        "GPU": gpus or "no Intel GPU render node",
        "driver": f"kernel driver {drivers}" if drivers else "",
        "driver line": {"rolling": "rolling"}.get(line, f"LTS {line[4:]}" if line.startswith("lts/") else ""),
        "kernel": platform.release(),
    }


def _print_report(o: DoctorOptions, engine_ok: bool, runner: ContainerRunner | None, out: Callable[[str], None]) -> int:
    """``--report``: the fingerprint, host facts plus the image's probe where an image runs."""
    image: dict[str, str] = {}
    if o.image and engine_ok and runner is not None:
        found = gpu.gpu_run_options(o.sysfs_root, o.dev_root, o.host_root, shm_size=o.shm_size)
        options = {**found.for_engine(*o.engine_kind).docker_kwargs(), **(o.engine_options or {})}
        try:
            _code, stdout = runner(o.image, PROBE_COMMAND, options)
            image = fingerprint.image_facts(parse_probe_output(stdout))
        except (ImageUnavailable, ValueError) as exc:
            out(f"# the image's half is missing: {engine.short_reason(exc)}")
    elif o.image:
        out("# the image's half is missing: no engine answers")
    fields = fingerprint.merge(host_facts(o.sysfs_root, o.dev_root, o.host_root), image)
    for line in fingerprint.render(fields, fingerprint.private_words()):
        out(line)
    return 0


def run_doctor(options: DoctorOptions, out: Callable[[str], None] = print) -> int:
    """Print every finding, one per line; return 1 when any failed, else 0."""
    o = options
    image, eng, sysfs_root, dev_root, host_root = o.image, o.eng, o.sysfs_root, o.dev_root, o.host_root
    engine_probe, buildkit_probe, runner, disk_path, free_bytes = (
        o.engine_probe,
        o.buildkit_probe,
        o.runner,
        o.disk_path,
        o.free_bytes,
    )
    user, need_gib, expected_pins, shm_size = o.user, o.need_gib, o.expected_pins, o.shm_size
    engine_kind, engine_options, engine_endpoint = o.engine_kind, o.engine_options, o.engine_endpoint
    if eng is not None:
        engine_probe = engine_probe or eng.version_line
        buildkit_probe = buildkit_probe or eng.builder_line
        runner = runner or engine_runner(eng)
    if engine_probe is None or buildkit_probe is None:
        raise TypeError("run_doctor needs an engine, or every probe given")
    engine_ok, engine_why = engine_probe()
    if o.report:
        return _print_report(o, engine_ok, runner, out)
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
        elif runner is None:
            raise TypeError("run_doctor needs an engine, or a runner, to check an image")
        else:
            host_has_gpu, _ = gpu.has_intel_gpu(sysfs_root, dev_root)
            found = gpu.gpu_run_options(sysfs_root, dev_root, host_root, shm_size=shm_size).for_engine(*engine_kind)
            run_options = {**found.docker_kwargs(), **(engine_options or {})}
            extra = in_container_checks(image, runner, run_options, host_has_gpu, expected_pins)
        for f in extra:
            out(f.line())
        findings += extra
    else:
        out(Finding("skip", "image", "no image given: in-container checks skipped (invoke doctor --image NAME)").line())

    failed = [f for f in findings if f.status == "fail"]
    warned = [f for f in findings if f.status == "warn"]
    out(f"doctor: {len(failed)} failed, {len(warned)} warnings, {len(findings)} checks")
    return 1 if failed else 0
