"""`invoke test`: host tests, then the tests inside the image, with one summary line at the end."""

from __future__ import annotations

import dataclasses
import fcntl
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import types
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from xpukit.host import engine, processes, ui
from xpukit.host.image import trust
from xpukit.host.run import containers
from xpukit.host.run.in_image import plan_for_run
from xpukit.host.settings import Context
from xpukit.layout import REPO_ROOT

PHASES = ("all", "host", "container")
# What `--suite` selects, by marker. quick (the default, minutes): host logic (unit) and the
# runtime tests in the image. engine: the engine suites alone (marker docker: cold builds, verify,
# registry, podman, Slurm, cluster; most of an hour). all: both (CI runs them as quick's two
# phases and engine, one timed phase each). smoke: all's tests marked sharing_smoke, a few that
# prove a pulled image works (CI's engine B, .ci/engine_b.py). A new engine test is in engine and
# all by its folder's marker; nothing here names test files.
SUITES = {
    "quick": ("unit", "container", "gpu"),
    "engine": ("docker",),
    "all": ("unit", "container", "gpu", "docker"),
    "smoke": ("unit", "container", "gpu", "docker"),
}
SMOKE_MARKER = "sharing_smoke"
# pytest's "no tests were collected": a phase with nothing selected is not a failure.
NO_TESTS = 5
# Where each marker runs when the image is in play (tests/conftest.py keeps each in its folder).
ON_THE_HOST = ("unit", "docker")
IN_THE_IMAGE = ("container", "gpu")
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


def _markers(suite: str, wanted: tuple[str, ...]) -> str:
    """The pytest -m expression for the suite's markers among ``wanted`` ("" when none). A suite
    without the engine suites leaves out every docker-marked test, also one whose module is marked
    unit too (tests/engine/test_docs.py)."""
    names = [m for m in SUITES[suite] if m in wanted]
    chosen = " or ".join(names)
    if not chosen:
        return ""
    if suite == "smoke":
        return f"({chosen}) and {SMOKE_MARKER}"
    if "docker" not in SUITES[suite] and "unit" in names:
        return f"({chosen}) and not docker" if len(names) > 1 else f"{chosen} and not docker"
    return chosen


def _host_markers(where: str, engine_ok: bool, kind: str = "docker", suite: str = "quick") -> str:
    """What the host runs: with the image in play host logic and (suites engine, all) the engine
    suites; on the host everything, the engine suites only where an engine answers. The engine
    suites (marker docker) drive Docker's engine and BuildKit: on podman only host logic runs here
    (podman's own checks, tests/engine/test_podman.py, run from a Docker host)."""
    wanted: tuple[str, ...] = ON_THE_HOST if where == "container" else (*ON_THE_HOST, *IN_THE_IMAGE)
    if not (engine_ok and kind == "docker"):
        wanted = tuple(m for m in wanted if m != "docker")
    return _markers(suite, wanted)


def _container_markers(suite: str) -> str:
    return _markers(suite, IN_THE_IMAGE)


RESULTS_FOLDER = "xpukit-test-{uid}"  # under the temp folder: one per user, so a dry run can name it


@dataclasses.dataclass(frozen=True)
class TestPlan:
    """One `invoke test`, as a value: the host pytest command with its environment, and the
    container run (image, command, options), decided before anything runs. A dry run prints
    :meth:`lines`; the real run executes exactly these."""

    host_command: tuple[str, ...]  # () when the host phase does not run
    host_env: Mapping[str, str]
    image: str  # the image the container phase runs in ("" when it does not run)
    container_command: tuple[str, ...]
    container_options: Mapping[str, Any]
    results: Path
    engine_cli: str

    def host_line(self) -> str:
        return processes.printable(self.host_command, self.host_env)

    def container_line(self) -> str:
        run = processes.format_run_cli(
            self.engine_cli, self.image, list(self.container_command), self.container_options
        )
        return shlex.join(run)

    def lines(self) -> list[str]:
        return [
            *([self.host_line()] if self.host_command else []),
            *([self.container_line()] if self.image else []),
        ]


def results_folder(temp: str | None = None) -> Path:
    """Where a run's junit reports go: one folder per user under the temp folder (TMPDIR), named
    without randomness so a dry run prints the same paths; a run holds a lock on it."""
    return Path(temp or tempfile.gettempdir()) / RESULTS_FOLDER.format(uid=os.getuid())


class _Results:
    """The results folder held for one run (an flock on it): a second `invoke test` of this user
    at the same time gets a fresh folder of its own."""

    def __init__(self, wanted: Path) -> None:
        self.path = wanted
        self.fd = -1
        try:
            wanted.mkdir(mode=0o700, exist_ok=True)
            fd = os.open(wanted, os.O_RDONLY)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.fd = fd
            if os.fstat(fd).st_uid != os.getuid() or wanted.is_symlink():
                raise OSError("not this user's folder")
            os.chmod(fd, 0o700)
            self._empty()  # a run that was killed leaves its reports behind
        except OSError:
            if self.fd >= 0:
                os.close(self.fd)
                self.fd = -1
            # Not a line of output: a run nested in another (the kit's own tests run `invoke test`)
            # prints what a lone run prints; only the reports' folder differs.
            self.path = Path(tempfile.mkdtemp(prefix="xpukit-test-"))

    def _empty(self) -> None:
        for old in self.path.iterdir():
            old.unlink() if old.is_file() or old.is_symlink() else shutil.rmtree(old, ignore_errors=True)

    def release(self) -> None:
        if self.fd < 0:
            shutil.rmtree(self.path, ignore_errors=True)
            return
        # The folder stays, empty and private again, for the next run; the lock goes with the fd.
        self._empty()
        os.chmod(self.fd, 0o700)
        os.close(self.fd)
        self.fd = -1


def plan_tests(
    ctx: Context,
    where: str,
    pytest_args: list[str],
    phase: str,
    image: str,
    engine_ok: bool,
    results: Path,
    suite: str = "quick",
) -> TestPlan:
    """The commands of one test run: ``image`` is the plan's content tag where an engine is in
    play ("" where none answers), ``results`` the folder the junit reports go to, ``suite`` one of
    :data:`SUITES`."""
    env: dict[str, str] = {}
    if image:
        env["XPUKIT_TEST_IMAGE"] = image
        env["XPUKIT_IMAGE"] = ctx.settings.image
        env["XPUKIT_ENGINE"] = ctx.engine.kind
        if ctx.engine.api and ctx.engine.kind == "docker":
            env["DOCKER_HOST"] = ctx.engine.api
    # The image tests check that the bundle the build trusted left no trace in it.
    env["XPUKIT_TEST_CA_BUNDLE"] = trust.ca_bundle(ctx).path
    host: tuple[str, ...] = ()
    markers = _host_markers(where, engine_ok, ctx.engine.kind, suite)
    if phase != "container" and markers:
        host = (sys.executable, "-m", "pytest", "-m", markers, f"--junitxml={results / 'host.xml'}", *pytest_args)
    in_image = where == "container" and phase != "host" and bool(_container_markers(suite))
    return TestPlan(
        host,
        types.MappingProxyType(env),
        image if in_image else "",
        tuple(_container_pytest(pytest_args, suite)) if in_image else (),
        _container_options(ctx, results) if in_image else {},
        results,
        ctx.engine.cli_name,
    )


def _pytest_host(plan: TestPlan) -> Phase:
    markers = plan.host_command[plan.host_command.index("-m", 2) + 1]
    phase = Phase(f"host ({markers})")
    ui.say("host tests: " + " ".join(plan.host_command[1:]))
    processes.record(plan.host_line())
    env = {**os.environ, **plan.host_env}
    phase.exit_code = subprocess.run(plan.host_command, cwd=REPO_ROOT, env=env, check=False).returncode
    read_junit(plan.results / "host.xml", phase)
    return phase


def run_tests(
    ctx: Context, where: str, why: str, pytest_args: list[str], phase: str = "all", suite: str = "quick"
) -> int:
    """Host tests, then (where == "container") the tests inside the plan's image; ``phase`` host or
    container runs only that one, ``suite`` which tests (:data:`SUITES`)."""
    require_docker = os.environ.get("XPUKIT_REQUIRE_DOCKER") == "1"
    engine_ok, engine_why = ctx.engine.answers() if where != "container" else (True, "")
    if ctx.dry_run:
        image = ""
        if where == "container" or engine_ok:
            image = plan_for_run(ctx).tag  # with the build a real run would start with
        for line in plan_tests(ctx, where, pytest_args, phase, image, engine_ok, results_folder(), suite).lines():
            print(line)
        return 0

    image = ""
    if where == "container" or engine_ok:
        image = plan_for_run(ctx).tag  # on the engine now: found, pulled or built
    results = _Results(results_folder())
    phases: list[Phase] = []
    try:
        plan = plan_tests(ctx, where, pytest_args, phase, image, bool(image), results.path, suite)
        if plan.host_command:
            if ctx.engine.kind == "podman" and "docker" in SUITES[suite]:
                ui.say("podman: the host's image checks (marker docker) drive Docker and BuildKit; not run here")
            phases.append(_pytest_host(plan))
        if plan.image:
            phases.append(_run_container_phase(ctx, plan))
        elif not image and phase != "host" and _container_markers(suite):
            note = f"container tests: not run ({engine_why}); {engine.START_ENGINE_FIX}"
            phases.append(Phase("container", exit_code=1 if require_docker else 0, note=note))
    finally:
        results.release()

    for finished in phases:
        if finished.note:
            ui.say(finished.note)
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


def _container_pytest(pytest_args: list[str], suite: str = "quick") -> list[str]:
    return [
        "python",
        "-m",
        "pytest",
        "-m",
        _container_markers(suite),
        "-p",
        "no:cacheprovider",
        "--junitxml=/results/container.xml",
        *pytest_args,
    ]


def _container_options(ctx: Context, results: Path) -> dict:
    env = {name: os.environ[name] for name in PASS_THROUGH if os.environ.get(name)}
    options = containers.container_options(ctx, env)
    options["volumes"][str(results)] = {"bind": "/results", "mode": "rw"}
    ca = trust.ca_bundle(ctx)
    if ca.path:
        # Tests that fetch (the UR release matrix) trust the same CA as the build; mounted, never baked.
        options["volumes"][ca.path] = {"bind": CA_IN_CONTAINER, "mode": "ro"}
        options["environment"].update({"PIP_CERT": CA_IN_CONTAINER, "SSL_CERT_FILE": CA_IN_CONTAINER})
    return options


def _run_container_phase(ctx: Context, plan: TestPlan) -> Phase:
    phase = Phase(f"container ({plan.container_command[plan.container_command.index('-m') + 1]})")
    plan.results.chmod(0o777)  # the container's non-root user writes its report here
    ui.say(f"container tests in {plan.image}: {' '.join(plan.container_command)}")
    phase.exit_code = ctx.engine.run(plan.image, list(plan.container_command), plan.container_options)
    report = plan.results / "container.xml"
    read_junit(report, phase)
    if phase.exit_code not in (0, NO_TESTS) and not report.exists():
        phase.failed += 1
        phase.note = f"container tests: pytest died (exit {phase.exit_code}) before writing its report; see above"
    return phase
