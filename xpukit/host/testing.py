"""`invoke test`: host tests, then the tests inside the image, with one summary line at the end."""

from __future__ import annotations

import dataclasses
import functools
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from xpukit.host import containers, engine, sharing, ui
from xpukit.host.plan import dry_run_sdk, ensure_image, make_plan
from xpukit.host.settings import Context

PHASES = ("all", "host", "container")
# pytest's "no tests were collected": a phase with nothing selected is not a failure.
NO_TESTS = 5
# Host logic (unit) and image checks (docker) run on the host; the runtime tests in the image.
HOST_MARKERS = "unit or docker"
CONTAINER_MARKERS = "container or gpu"
# Host settings the tests in the image honour.
PASS_THROUGH = (
    "XPUKIT_REQUIRE_UR_MATRIX",
    "XPUKIT_REQUIRE_DOCKER",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
)
CA_IN_CONTAINER = "/run/xpukit/ca-bundle.pem"


@dataclasses.dataclass
class Phase:
    name: str
    exit_code: int = 0
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code in (0, NO_TESTS)


def read_junit(path: Path, phase: Phase) -> None:
    """Count outcomes from a junit report (pytest's --junitxml)."""
    if not path.exists():
        return
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    for suite in suites:
        tests = int(suite.get("tests", 0))
        failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        skipped = int(suite.get("skipped", 0))
        phase.failed += failed
        phase.skipped += skipped
        phase.passed += tests - failed - skipped


def _host_markers(where: str, engine_ok: bool, kind: str = "docker") -> str:
    """What the host runs: with the image in play only host logic and image checks; on the host
    everything, the image checks only where an engine answers. The image checks (marker docker)
    drive Docker's engine and BuildKit: on podman only host logic runs here (podman's own checks,
    tests/test_podman.py, run from a Docker host)."""
    docker_checks = engine_ok and kind == "docker"
    if where == "container":
        return HOST_MARKERS if kind == "docker" else "unit"
    return "unit or container or gpu" + (" or docker" if docker_checks else "")


def _pytest_host(markers: str, report: Path, extra: list[str], env: dict[str, str]) -> Phase:
    phase = Phase(f"host ({markers})")
    cmd = [sys.executable, "-m", "pytest", "-m", markers, f"--junitxml={report}", *extra]
    ui.say("host tests: " + " ".join(cmd[1:]))
    phase.exit_code = subprocess.run(cmd, cwd=containers.ROOT, env={**os.environ, **env}, check=False).returncode
    read_junit(report, phase)
    return phase


def run_tests(ctx: Context, where: str, why: str, pytest_args: list[str], phase: str = "all") -> int:
    """Host tests, then (where == "container") the tests inside the plan's image; ``phase`` host or
    container runs only that one."""
    require_docker = os.environ.get("XPUKIT_REQUIRE_DOCKER") == "1"
    engine_ok, engine_why = ctx.engine.answers() if where != "container" else (True, "")
    if ctx.dry_run:
        if phase != "container":
            markers = _host_markers(where, engine_ok, ctx.engine.kind)
            print(shlex.join([sys.executable, "-m", "pytest", "-m", markers, *pytest_args]))
        if where == "container" and phase != "host":
            sdk = dry_run_sdk(ctx)
            plan = make_plan(ctx, sdk)
            if sdk is not None:
                sdk.close()
            options = _container_options(ctx, Path("/tmp/RESULTS"))
            line = engine.format_run_cli(ctx.engine.cli_name, plan.tag, _container_pytest(pytest_args), options)
            print(shlex.join(line))
        return 0

    sdk = ctx.engine.client() if (where == "container" or engine_ok) else None
    env: dict[str, str] = {}
    if sdk is not None:
        plan = make_plan(ctx, sdk, base_required=False)
        ensure_image(plan, sdk, functools.partial(sharing.shared_image, ctx, plan, sdk))
        env["XPUKIT_TEST_IMAGE"] = plan.tag
        env["XPUKIT_IMAGE"] = ctx.settings.image
        env["XPUKIT_ENGINE"] = ctx.engine.kind
        if ctx.engine.api and ctx.engine.kind == "docker":
            env["DOCKER_HOST"] = ctx.engine.api
    # The image tests check that the bundle the build trusted left no trace in it.
    env["XPUKIT_TEST_CA_BUNDLE"] = ctx.ca_bundle.path

    results = Path(tempfile.mkdtemp(prefix="xpukit-test-"))
    phases: list[Phase] = []
    try:
        if phase != "container":
            if ctx.engine.kind == "podman":
                ui.say("podman: the host's image checks (marker docker) drive Docker and BuildKit; not run here")
            markers = _host_markers(where, sdk is not None, ctx.engine.kind)
            phases.append(_pytest_host(markers, results / "host.xml", pytest_args, env))
        if where == "container" and phase != "host":
            phases.append(_run_container_phase(ctx, sdk, env["XPUKIT_TEST_IMAGE"], results, pytest_args))
        elif sdk is None and phase != "host":
            note = f"container tests: not run ({engine_why}); {engine.START_ENGINE_FIX}"
            phases.append(Phase("container", exit_code=1 if require_docker else 0, note=note))
    finally:
        shutil.rmtree(results, ignore_errors=True)

    for phase in phases:
        if phase.note:
            ui.say(phase.note)
    passed = sum(p.passed for p in phases)
    failed = sum(p.failed for p in phases)
    skipped = sum(p.skipped for p in phases)
    broken = [p.name for p in phases if not p.ok]
    ui.say(f"where: {where} ({why})")
    print(f"xpukit: {passed} passed, {failed} failed, {skipped} skipped", flush=True)
    if broken:
        if require_docker and any(p.name == "container" and p.note for p in phases):
            print(
                "xpukit: error: XPUKIT_REQUIRE_DOCKER=1 but the container tests could not run "
                f"(fix: {engine.START_ENGINE_FIX})",
                file=sys.stderr,
            )
        return 1
    return 0


def _container_pytest(pytest_args: list[str]) -> list[str]:
    return [
        "python",
        "-m",
        "pytest",
        "-m",
        CONTAINER_MARKERS,
        "-p",
        "no:cacheprovider",
        "--junitxml=/results/container.xml",
        *pytest_args,
    ]


def _container_options(ctx: Context, results: Path) -> dict:
    env = {name: os.environ[name] for name in PASS_THROUGH if os.environ.get(name)}
    options = containers.container_options(ctx, env)
    options["volumes"][str(results)] = {"bind": "/results", "mode": "rw"}
    if ctx.ca_bundle.path:
        # Tests that fetch (the UR release matrix) trust the same CA as the build; mounted, never baked.
        options["volumes"][ctx.ca_bundle.path] = {"bind": CA_IN_CONTAINER, "mode": "ro"}
        options["environment"].update({"PIP_CERT": CA_IN_CONTAINER, "SSL_CERT_FILE": CA_IN_CONTAINER})
    return options


def _run_container_phase(ctx: Context, sdk: object, tag: str, results: Path, pytest_args: list[str]) -> Phase:
    phase = Phase(f"container ({CONTAINER_MARKERS})")
    results.chmod(0o777)  # the container's non-root user writes its report here
    options = _container_options(ctx, results)
    command = _container_pytest(pytest_args)
    ui.say(f"container tests in {tag}: {' '.join(command)}")
    phase.exit_code = engine.run_container(sdk, tag, command, **options)
    read_junit(results / "container.xml", phase)
    if phase.exit_code not in (0, NO_TESTS) and not (results / "container.xml").exists():
        phase.failed += 1
        phase.note = f"container tests: pytest died (exit {phase.exit_code}) before writing its report; see above"
    return phase
