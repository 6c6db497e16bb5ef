"""`invoke doctor`: what works on this host and in an image, one line per finding.

Host checks read sysfs and /dev from roots given as parameters; the engine, BuildKit, disk and
container runs are injected callables, so every check runs in tests without Docker or a GPU.
Each finding says its status (ok / warn / fail / skip), what was found, and the fix.
"""

from __future__ import annotations

import dataclasses
import grp
import importlib.util
import json
import os
import shutil
from collections.abc import Callable, Mapping
from typing import Any

from xpukit.errors import XpukitError
from xpukit.host import engine, gpu
from xpukit.host import podman as podman_mod
from xpukit.runtime import manifest as manifest_mod
from xpukit.runtime.ocloc import find_ocloc

STATUSES = ("ok", "warn", "fail", "skip")
GIB = 1024**3
# Rough free-space needs (estimates, not measurements): PyTorch's build tree + ccache is tens of GiB,
# LLVM from source adds more; the cpu image (~1.4 GiB) with BuildKit's cache and wheelhouse a few.
# The one statement of the doctor's disk budget; warn below it.
SOURCE_BUILD_FREE_GIB = 80
IMAGE_ONLY_FREE_GIB = 10


def disk_budget_gib(profile: str) -> int:
    """Free space the doctor asks for: the xpu profile builds from source, the cpu one does not."""
    return SOURCE_BUILD_FREE_GIB if profile == "xpu" else IMAGE_ONLY_FREE_GIB


PROBE_COMMAND = ["python", "-m", "xpukit.runtime.doctor_probe"]

# (image, command, docker-SDK run options) -> (exit code, stdout)
ContainerRunner = Callable[[str, list[str], dict[str, Any]], tuple[int, str]]
Probe = Callable[[], tuple[bool, str]]


@dataclasses.dataclass(frozen=True)
class Finding:
    status: str  # one of STATUSES
    check: str  # short name, e.g. "engine", "gpu", "ur-devices"
    found: str
    fix: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")

    def line(self) -> str:
        text = f"{self.status.upper():<4}  {self.check:<12} {self.found}"
        return f"{text}  -> fix: {self.fix}" if self.fix and self.status in ("warn", "fail") else text


class ImageUnavailable(Exception):
    """The runner could not start the image (not built, engine refused)."""


# ---- host --------------------------------------------------------------------------------------


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
    otherwise; a pull of the cpu image took 1.85x as long without it (docs/BENCHMARKS.md).
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
        "and apt-get install intel-opencl-icd (ocloc)",
    )


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
        check_disk(disk_path, free_bytes, need_gib),
        check_host_run(),
    ]


# ---- in the container --------------------------------------------------------------------------


def parse_probe_output(stdout: str) -> dict[str, Any]:
    """The probe's JSON object: its last line starting with "{" (native libraries may print)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError("no JSON object in the probe's output")


def _version_of(value: Any) -> str:
    return str(value.get("version", "")) if isinstance(value, Mapping) else str(value or "")


def _manifest_findings(report: Mapping[str, Any], expected_pins: Mapping[str, str] | None) -> list[Finding]:
    manifest = report.get("manifest") or {}
    data = manifest.get("data")
    if not isinstance(data, Mapping):
        return [
            Finding(
                "fail",
                "manifest",
                manifest.get("error") or "no manifest in the image",
                "rebuild the image with `invoke build` (its last step writes /opt/xpukit/manifest.json)",
            )
        ]
    installed = report.get("installed") or {}
    pins = data.get("pins") or {}
    out: list[Finding] = []
    drift = []
    # What runs now against what the image recorded at build time.
    for key in ("python", "triton", "torch", "numpy"):
        have, recorded = str(installed.get(key, "")), _version_of(data.get(key, ""))
        if key in installed and have != recorded:
            drift.append(f"{key} {recorded or 'absent'} -> {have or 'absent'}")
    if drift:
        out.append(
            Finding(
                "fail",
                "manifest",
                "installed packages differ from the manifest: " + "; ".join(drift),
                "something was pip-installed over the image; rebuild it or start a fresh container",
            )
        )
    # What the image recorded against the pins it was built from (the build's own check).
    mismatch = manifest_mod.mismatches(data)
    if mismatch:
        out.append(
            Finding(
                "fail",
                "manifest",
                "image does not match its own pins: " + "; ".join(mismatch),
                "rebuild with `invoke build`; if it persists, the pins name a version the build cannot get",
            )
        )
    # The image's pins against the host's current pins (env/pins.toml).
    if expected_pins:
        stale = [
            f"{k}: image {pins.get(k, '') or '(none)'}, pins {v or '(none)'}"
            for k, v in expected_pins.items()
            if str(pins.get(k, "")) != str(v)
        ]
        if stale:
            out.append(
                Finding(
                    "warn",
                    "pins",
                    "image was built from other pins: " + "; ".join(stale),
                    "rebuild with `invoke build` to pick up env/pins.toml",
                )
            )
        else:
            out.append(Finding("ok", "pins", "image matches env/pins.toml"))
    if not out or all(f.check == "pins" for f in out):
        found = (
            f"profile {data.get('profile', '?')}, triton {data.get('triton') or '?'}, python {data.get('python', '?')}"
        )
        out.insert(0, Finding("ok", "manifest", found))
    return out


def container_findings(
    report: Mapping[str, Any], host_has_gpu: bool, expected_pins: Mapping[str, str] | None = None
) -> list[Finding]:
    """Turn the probe's JSON into findings; ``host_has_gpu`` decides whether no GPU is a failure."""
    data = (report.get("manifest") or {}).get("data") or {}
    profile = data.get("profile", "") if isinstance(data, Mapping) else ""
    xpu = profile == "xpu"
    out: list[Finding] = []

    ur = report.get("ur") or {}
    if ur.get("status") == "skip":
        out.append(Finding("skip", "ur", ur.get("error") or "xpukit.runtime.ur not in the image"))
    elif ur.get("status") != "ok" or not ur.get("loader"):
        out.append(
            Finding(
                "fail",
                "ur",
                f"UR loader: {ur.get('error') or 'not found'}",
                "xpu: use the DLE base (oneAPI compiler runtime); "
                "cpu: install intel-cmplr-lib-ur and intel-cmplr-lib-rt",
            )
        )
    else:
        release = ur.get("release") or ur.get("release_error") or "release unknown"
        form = f", launch: {ur['launch_form']}" if ur.get("launch_form") else ""
        out.append(Finding("ok", "ur", f"UR loader {ur['loader']} ({release}{form})"))
        adapters = ur.get("adapters") or []
        if xpu and not any(a.startswith("level_zero") for a in adapters):
            out.append(
                Finding(
                    "fail",
                    "ur-adapters",
                    f"no Level Zero adapter next to the loader (found: {', '.join(adapters) or 'none'})",
                    "the oneAPI compiler runtime ships libur_adapter_level_zero.so; check the base image",
                )
            )
        else:
            out.append(Finding("ok" if adapters else "warn", "ur-adapters", ", ".join(adapters) or "none found"))
        gpu_dev, cpu_dev = ur.get("gpu") or {}, ur.get("cpu") or {}
        if gpu_dev.get("name"):
            out.append(
                Finding(
                    "ok",
                    "ur-gpu",
                    f"{gpu_dev['name']} via {gpu_dev.get('backend', '?')}, driver {gpu_dev.get('driver_version', '?')}",
                )
            )
        elif host_has_gpu:
            out.append(
                Finding(
                    "fail",
                    "ur-gpu",
                    f"the host has an Intel GPU but UR sees none in the container ({gpu_dev.get('error', '')})",
                    "run with the GPU flags (invoke shell, demo-ur and test add --device /dev/dri and --group-add); "
                    "check the image has Intel's Level Zero GPU driver "
                    "(libze-intel-gpu1 / intel-level-zero-gpu)",
                )
            )
        else:
            out.append(Finding("skip", "ur-gpu", "no Intel GPU on this host"))
        if cpu_dev.get("name"):
            out.append(Finding("ok", "ur-cpu", f"{cpu_dev['name']} via {cpu_dev.get('backend', '?')}"))
        elif not xpu:
            out.append(
                Finding(
                    "fail",
                    "ur-cpu",
                    f"no CPU device through UR ({cpu_dev.get('error', '')})",
                    "the cpu profile needs intel-opencl-rt and OCL_ICD_FILENAMES pointing at libintelocl.so",
                )
            )

    oc = report.get("ocloc") or {}
    if oc.get("path"):
        targets = oc.get("targets") or []
        known = ", ".join(t for t in ("pvc", "dg2", "bmg", "lnl", "mtl") if t in targets)
        out.append(
            Finding(
                "ok",
                "ocloc",
                f"ocloc {oc.get('version') or '(version unknown)'}: {len(targets)} targets "
                f"({known or 'none of pvc/dg2/bmg/lnl/mtl'})",
            )
        )
        if xpu and not {"bmg", "lnl"} <= set(targets):
            out.append(
                Finding(
                    "warn",
                    "ocloc",
                    "this ocloc cannot target bmg/lnl",
                    "install Intel's current intel-ocloc (matching the image's compute runtime)",
                )
            )
    else:
        out.append(
            Finding(
                "fail",
                "ocloc",
                oc.get("error") or "ocloc not found",
                "xpu: install intel-ocloc from Intel's GPU repository; cpu: apt-get install intel-opencl-icd",
            )
        )

    ze = report.get("level_zero") or {}
    if ze.get("path"):
        out.append(Finding("ok", "level-zero", f"loader {ze['path']} (version {ze.get('version') or '?'})"))
    elif xpu:
        out.append(
            Finding(
                "fail",
                "level-zero",
                ze.get("error") or "libze_loader.so.1 not found",
                "install libze1 (Level Zero loader) from Intel's GPU repository in the image",
            )
        )
    else:
        out.append(Finding("skip", "level-zero", "not used by the cpu profile (UR runs on OpenCL)"))

    one = report.get("oneapi") or {}
    if one.get("version"):
        env = "environment set" if one.get("setvars") else "setvars not applied"
        out.append(Finding("ok", "oneapi", f"oneAPI {one['version']} at {one.get('root')} ({env})"))
    elif xpu:
        out.append(
            Finding(
                "fail",
                "oneapi",
                "no oneAPI compiler release under /opt/intel/oneapi",
                "build the xpu profile FROM intel/deep-learning-essentials",
            )
        )
    else:
        out.append(Finding("skip", "oneapi", "not part of the cpu profile (UR from PyPI)"))

    out.extend(_manifest_findings(report, expected_pins))
    return out


def in_container_checks(
    image: str,
    runner: ContainerRunner,
    run_options: dict[str, Any],
    host_has_gpu: bool,
    expected_pins: Mapping[str, str] | None = None,
) -> list[Finding]:
    try:
        code, stdout = runner(image, PROBE_COMMAND, run_options)
    except ImageUnavailable as exc:
        return [Finding("fail", "image", str(exc), f"build it: invoke build (image {image})")]
    try:
        report = parse_probe_output(stdout)
    except ValueError as exc:
        return [
            Finding(
                "fail",
                "probe",
                f"the probe in {image} exited {code} without a report ({exc})",
                f"run it by hand: docker run --rm {image} {' '.join(PROBE_COMMAND)}",
            )
        ]
    return [
        Finding("ok", "image", f"{image}: probe ran"),
        *container_findings(report, host_has_gpu, expected_pins),
    ]


# ---- defaults wired to the docker SDK ----------------------------------------------------------


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
