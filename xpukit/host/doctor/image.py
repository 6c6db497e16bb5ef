"""The image half of ``invoke doctor``: runs the runtime probe (``xpukit.runtime.image.doctor_probe``)
inside the image and turns its report into findings (manifest and pins, UR loader, launch form
and adapters, devices, ocloc, Triton)."""

import json
from collections.abc import Callable, Mapping
from typing import Any

from xpukit.host import processes
from xpukit.host.doctor.findings import Finding
from xpukit.runtime.image import manifest as manifest_mod
from xpukit.targets import FAMILIES

PROBE_COMMAND = ["python", "-m", "xpukit.runtime.image.doctor_probe"]

# (image, command, docker-SDK run options) -> (exit code, stdout)
ContainerRunner = Callable[[str, list[str], dict[str, Any]], tuple[int, str]]
Probe = Callable[[], tuple[bool, str]]


class ImageUnavailable(Exception):
    """The runner could not start the image (not built, engine refused)."""


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
                f"rebuild the image with `invoke build` (its last step writes {manifest_mod.MANIFEST_PATH})",
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
        known = [f.name for f in FAMILIES if f.ocloc_device in targets]
        out.append(
            Finding(
                "ok",
                "ocloc",
                f"ocloc {oc.get('version') or '(version unknown)'}: {len(targets)} targets "
                f"({', '.join(known) or 'none of the families in xpukit/targets.py'})",
            )
        )
        # The seven upstream builds and tests (their own Triton properties): an ocloc without one is too old.
        # The newest (wcl, nvl-s, nvl-p, cri: ptl's properties) need ocloc 26.27; lacking them is said, not warned.
        lacking = [f.name for f in FAMILIES if f.ocloc_device not in targets and f.triton_from is None]
        newest = [f.name for f in FAMILIES if f.ocloc_device not in targets and f.triton_from is not None]
        if newest and not lacking:
            out.append(
                Finding("ok", "ocloc", f"not {'/'.join(newest)} (ocloc 26.27 or later builds them: the cpu image)")
            )
        if lacking:
            out.append(
                Finding(
                    "warn",
                    "ocloc",
                    f"this ocloc cannot target {'/'.join(lacking)}",
                    "cpu: rebuild the image (its compiler stage carries ocloc 26.27); "
                    "xpu: install Intel's current intel-ocloc (matching the image's compute runtime)",
                )
            )
    else:
        out.append(
            Finding(
                "fail",
                "ocloc",
                oc.get("error") or "ocloc not found",
                "xpu: install intel-ocloc from Intel's GPU repository; cpu: rebuild the image (ocloc 26.27)",
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
    out.extend(onboarding_findings(report, xpu, host_has_gpu))
    return out


def onboarding_findings(report: Mapping[str, Any], xpu: bool, host_has_gpu: bool) -> list[Finding]:
    """What stops people onboarding onto upstream (its issues): headers, a shadowing triton wheel,
    an ocloc not matching IGC, the render node's group in the container, the driver line."""
    out: list[Finding] = []
    missing = [k for k in ("headers", "triton_dists", "render_nodes", "gpu_stack") if k not in report]
    if missing:  # an image built before these probes: say so once rather than fail what was not looked at
        return [
            Finding("skip", "onboarding", f"the image's probe predates {', '.join(missing)}: rebuild to check them")
        ]
    headers = report.get("headers") or {}
    if not xpu:
        out.append(Finding("skip", "headers", "not needed by the cpu profile (no SYCL launcher is compiled)"))
    else:
        for key, what, fix in (
            (
                "ze_api",
                "ze_api.h (Level Zero headers)",
                "apt-get install libze-dev (RHEL: dnf install level-zero-devel; SLES: zypper install level-zero-devel)",
            ),
            (
                "sycl",
                "sycl/sycl.hpp (SYCL headers)",
                "source /opt/intel/oneapi/setvars.sh, or build FROM the DLE image (or --base omix)",
            ),
        ):
            if headers.get(key):
                out.append(Finding("ok", "headers", f"{what}: {headers[key]}"))
            else:
                out.append(Finding("fail", "headers", f"no {what}: Triton's Intel driver cannot build", fix))

    dists = report.get("triton_dists") or {}
    owners = dists.get("distributions") or {}
    if isinstance(owners, Mapping) and owners:
        listed = ", ".join(f"{name} {version}".strip() for name, version in sorted(owners.items()))
        generic = "triton" in owners and (len(owners) > 1 or not dists.get("intel_backend"))
        if generic or not dists.get("intel_backend"):
            out.append(
                Finding(
                    "fail",
                    "triton-wheel",
                    f"the triton that imports ({dists.get('location') or '?'}) has no Intel backend; "
                    f"installed: {listed}",
                    "pip uninstall -y triton, then reinstall the XPU one (pip install --force-reinstall triton-xpu, "
                    "or rebuild the image: invoke build)",
                )
            )
        else:
            out.append(Finding("ok", "triton-wheel", f"{listed}, with Intel's backend"))

    stack = report.get("gpu_stack") or {}
    data = (report.get("manifest") or {}).get("data") or {}
    pins = got if isinstance(data, Mapping) and isinstance(got := data.get("pins"), Mapping) else {}
    packages = got if isinstance(got := stack.get("packages"), Mapping) else {}
    if pins.get("ocloc_source") == "intel-gpu-repo" or pins.get("omix_package"):
        problems = manifest_mod.gpu_stack_problems(packages, pins)
        runtime = next((packages[n]["version"] for n in manifest_mod.RUNTIME_PACKAGES if n in packages), "")
        pair = " ".join(filter(None, [pins.get("ocloc_package", ""), pins.get("ocloc_igc_package", "")]))
        fix = (
            f"apt-get install --allow-change-held-packages {pins.get('ocloc_package', 'intel-ocloc')}"
            f"{'=' + runtime if runtime else ''} && apt-mark hold {pair} (or rebuild: invoke build)"
        )
        for problem in problems:
            out.append(Finding("fail", "ocloc-igc", problem, fix))
        if not problems:
            igc = packages.get(pins.get("ocloc_igc_package", ""), {}).get("version", "")
            out.append(
                Finding("ok", "ocloc-igc", f"ocloc matches the runtime {runtime or '?'}; IGC {igc or '?'}; held")
            )
    else:
        out.append(Finding("skip", "ocloc-igc", "ocloc is not from Intel's GPU repository here (no IGC pair to hold)"))

    nodes = report.get("render_nodes") or []
    closed = [n for n in nodes if isinstance(n, Mapping) and not n.get("open")]
    if closed:
        gid = closed[0].get("gid")
        out.append(
            Finding(
                "fail",
                "render-gid",
                f"{closed[0].get('path')} is in the container but its group {gid} is not one of the user's",
                f"docker run --group-add {gid} (the number: the render group's name and id differ between "
                "host and image; invoke shell/test add it)",
            )
        )
    elif nodes:
        out.append(Finding("ok", "render-gid", f"{len(nodes)} render node(s) open in the container"))
    elif host_has_gpu:
        out.append(
            Finding(
                "fail",
                "render-gid",
                "no /dev/dri render node in the container",
                "docker run --device /dev/dri -v /dev/dri/by-path:/dev/dri/by-path "
                "--group-add <gid of /dev/dri/renderD*>",
            )
        )
    else:
        out.append(Finding("skip", "render-gid", "no Intel GPU on this host"))

    line = stack.get("driver_line", "")
    if line:
        out.append(Finding("ok", "driver-line", f"the image follows Intel's GPU repository line {line}"))
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
        if (killed := processes.killed_by_signal(code, f"the probe's container ({image})")) is not None:
            return [Finding("fail", "probe", killed.message, killed.fix)]  # killed, OOM, crashed: said so
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
