"""`invoke matrix` for real: the kit's image on the engine, on the local scheduler, through a real
single-node Slurm (sbatch --array, scancel), and through charliecloud (ch-convert, ch-run).

Each run has four cells from a test-only matrix file, one failing on purpose, and checks the table,
the exit code and `--only-failed`. Slurm: SLURM_CONF names a running one (.ci/run starts it with
.ci/slurm.sh), else the test starts its own with .ci/slurm.sh when root. Without Slurm or
charliecloud the tests skip, unless XPUKIT_REQUIRE_SLURM=1 (CI) makes that a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import ROOT

pytestmark = pytest.mark.docker

FAIL_CODE = 3
MATRIX = f"""schema = 1
[axes]
ur = ["pinned"]
target = ["pvc", "acm-g10"]
triton = ["default"]
suite = ["demo", "compile", "fail-on-purpose"]
[suites.fail-on-purpose]
command = ["python", "-c", "import sys; print('failing on purpose'); sys.exit({FAIL_CODE})"]
"""
EXPECTED = {"compile-acm-g10": "passed", "compile-pvc": "passed", "fail-on-purpose": "failed"}
ROW = re.compile(r"^\| (\S+) +\| (passed|failed|cancelled|no result)[^|]*\| ([0-9.]+ s|-) +\| (\S+) +\|$")


def required(what: str) -> None:
    message = f"needs {what}"
    if os.environ.get("XPUKIT_REQUIRE_SLURM") == "1":
        pytest.fail(f"XPUKIT_REQUIRE_SLURM=1 but {message}")
    pytest.skip(message)


def invoke_matrix(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "XPUKIT_PROFILE": "cpu", "XPUKIT_ENGINE": "docker", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "invoke", "matrix", *args],
        cwd=ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )


def rows(stdout: str) -> dict[str, tuple[str, str, Path]]:
    found = {}
    for line in stdout.splitlines():
        match = ROW.match(line)
        if match and match.group(1) != "cell":
            found[match.group(1)] = (match.group(2), match.group(3), Path(match.group(4)))
    return found


def check_run(result: subprocess.CompletedProcess, pinned_demo: bool = True) -> dict[str, tuple[str, str, Path]]:
    """Four cells: three passed, the one failing on purpose failed; exit 1; the files agree."""
    assert result.returncode == 1, result.stdout + result.stderr[-3000:]
    table = rows(result.stdout)
    demo = [name for name in table if name.startswith("demo-ur")]
    assert len(table) == 4 and len(demo) == 1, result.stdout
    assert {n: r for n, (r, _, _) in table.items() if n not in demo} == EXPECTED
    assert table[demo[0]][0] == "passed", (table[demo[0]][2]).read_text()[-2000:]
    assert "failed (exit 3)" in result.stdout
    for name, (outcome, seconds, log) in table.items():
        log = log if log.is_absolute() else ROOT / log
        data = json.loads((log.parent / "result.json").read_text())
        assert data["cell"] == name and data["result"] == outcome and seconds.endswith(" s")
        assert log.is_file()
    assert (table["compile-pvc"][2].parent / "zebin" / "pvc" / "scale_kernel.zebin").is_file() or (
        ROOT / table["compile-pvc"][2].parent / "zebin" / "pvc" / "scale_kernel.zebin"
    ).is_file()
    assert "failing on purpose" in _abs(table["fail-on-purpose"][2]).read_text()
    # progress while it waited
    assert re.search(r"matrix: \d+ queued, \d+ running, \d+ done", result.stderr)
    assert "matrix: 0 queued, 0 running, 4 done" in result.stderr
    return table


def _abs(path: Path) -> Path:
    return path if path.is_absolute() else ROOT / path


def check_only_failed(result: subprocess.CompletedProcess, first: dict[str, tuple[str, str, Path]]) -> None:
    assert result.returncode == 1, result.stdout + result.stderr[-3000:]
    table = rows(result.stdout)
    assert list(table) == ["fail-on-purpose"] and table["fail-on-purpose"][0] == "failed", result.stdout
    assert _abs(table["fail-on-purpose"][2]) != _abs(first["fail-on-purpose"][2])  # a new run


@pytest.fixture
def matrix_file(tmp_path: Path) -> Path:
    path = tmp_path / "matrix.toml"
    path.write_text(MATRIX)
    return path


def test_local_matrix_table_exit_code_and_only_failed(test_image, tmp_path, matrix_file):
    out = tmp_path / "runs"
    first = check_run(invoke_matrix("--file", str(matrix_file), "--out-dir", str(out)))
    check_only_failed(invoke_matrix("--only-failed", "--out-dir", str(out)), first)
    # every cell ran the image by its exact ID
    run = _abs(first["compile-pvc"][2]).parents[2]
    image_id = json.loads((run / "cells.json").read_text())["images"]["default"]["id"]
    assert image_id.startswith("sha256:") and f" {image_id} " in (run / "cells" / "compile-pvc" / "run.sh").read_text()


# ---------------------------------------------------------------- Slurm


@pytest.fixture(scope="module")
def slurm(tmp_path_factory) -> Iterator[dict[str, str]]:
    """SLURM_CONF of a running Slurm: the caller's, else one started here with .ci/slurm.sh."""
    if os.environ.get("SLURM_CONF"):
        yield {"SLURM_CONF": os.environ["SLURM_CONF"]}
        return
    if not shutil.which("sbatch") or not shutil.which("slurmctld") or not shutil.which("munged"):
        required("Slurm (apt-get install slurm-wlm munge), or SLURM_CONF naming a running one")
    if os.geteuid() != 0:
        required("root to start a single-node Slurm (or SLURM_CONF naming a running one)")
    folder = Path(
        subprocess.run(["mktemp", "-d", "/tmp/xpk-slurm.XXXX"], capture_output=True, text=True).stdout.strip()
    )
    started = subprocess.run([str(ROOT / ".ci" / "slurm.sh"), "start", str(folder)], capture_output=True, text=True)
    try:
        assert started.returncode == 0, started.stderr
        yield {"SLURM_CONF": str(folder / "slurm.conf")}
    finally:
        subprocess.run([str(ROOT / ".ci" / "slurm.sh"), "stop", str(folder)], check=False)
        shutil.rmtree(folder, ignore_errors=True)


def test_slurm_matrix_one_array_job_table_and_only_failed(test_image, slurm, tmp_path, matrix_file):
    out = tmp_path / "runs"
    args = ("--scheduler", "slurm", "--throttle", "2", "--out-dir", str(out))
    first = check_run(invoke_matrix("--file", str(matrix_file), *args, env=slurm))
    run = _abs(first["compile-pvc"][2]).parents[2]
    script = (run / "sbatch.sh").read_text()
    assert "#SBATCH --array=0-3%2\n" in script
    assert (run / "slurm-job").read_text().strip().isdigit()
    assert sorted(p.name for p in run.glob("slurm-*.out")) == [f"slurm-{i}.out" for i in range(4)]
    check_only_failed(invoke_matrix("--only-failed", *args, env=slurm), first)


def test_scancel_leaves_no_cell_passed(test_image, docker_client, slurm, tmp_path):
    matrix = tmp_path / "slow.toml"
    matrix.write_text(MATRIX.replace('suite = ["demo", "compile", "fail-on-purpose"]', 'suite = ["slow"]') + (
        '[suites.slow]\ncommand = ["sleep", "300"]\naxes = ["target"]\n'
    ))  # fmt: skip
    out = tmp_path / "runs"
    cmd = [
        sys.executable,
        "-m",
        "invoke",
        "matrix",
        "--file",
        str(matrix),
        "--scheduler",
        "slurm",
        "--out-dir",
        str(out),
    ]
    env = {**os.environ, "XPUKIT_PROFILE": "cpu", "XPUKIT_ENGINE": "docker", **slurm}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            started = list(out.glob("*/cells/*/started"))
            jobs = list(out.glob("*/slurm-job"))
            containers = docker_client.containers.list(filters={"name": "xpukit-matrix-"})
            if started and jobs and containers:  # one is enough: a 1-CPU node runs one task at a time
                break
            time.sleep(0.5)
        else:
            pytest.fail("no slow cell started within 300 s")
        run = jobs[0].parent
        job = jobs[0].read_text().strip()
        subprocess.run(["scancel", job], env=env, check=True)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, stdout + stderr
    table = rows(stdout)
    assert sorted(table) == ["slow-acm-g10", "slow-pvc"] and all(r != "passed" for r, _, _ in table.values()), stdout
    assert "cancelled" in {r for r, _, _ in table.values()}, stdout  # the started task's trap ran
    # the cancel removed the cells' containers
    names = {c.name for c in docker_client.containers.list(all=True)}
    assert not {n for n in names if n.startswith(f"xpukit-matrix-{run.name}-")}, names


# ---------------------------------------------------------------- charliecloud


def test_charliecloud_runs_the_cells_with_ch_run(test_image, tmp_path):
    if not shutil.which("ch-run") or not shutil.which("ch-convert"):
        required("charliecloud (apt-get install charliecloud)")
    out = tmp_path / "runs"
    result = invoke_matrix(
        "--runtime", "charliecloud", "--suite", "demo,compile", "--target", "pvc", "--out-dir", str(out)
    )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    table = rows(result.stdout)
    assert len(table) == 2 and all(r == "passed" for r, _, _ in table.values()), result.stdout
    script = (_abs(table["compile-pvc"][2]).parent / "run.sh").read_text()
    assert "ch-run " in script and " docker run " not in script
    assert "versions: UR" in _abs(next(p for n, (_, _, p) in table.items() if n.startswith("demo"))).read_text()
    shutil.rmtree(out / "charliecloud", ignore_errors=True)  # 1.4 GB unpacked


def test_ctrl_c_cancels_the_local_cells_and_still_prints_the_table(test_image, docker_client, tmp_path):
    matrix = tmp_path / "slow.toml"
    matrix.write_text(
        MATRIX.replace('suite = ["demo", "compile", "fail-on-purpose"]', 'suite = ["slow"]')
        + '[suites.slow]\ncommand = ["sleep", "300"]\naxes = ["target"]\n'
    )
    out = tmp_path / "runs"
    cmd = [sys.executable, "-m", "invoke", "matrix", "--file", str(matrix), "--out-dir", str(out)]
    env = {**os.environ, "XPUKIT_PROFILE": "cpu", "XPUKIT_ENGINE": "docker"}
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 300
        ours = {"name": "xpukit-matrix-"}
        while not (list(out.glob("*/cells/*/started")) and docker_client.containers.list(filters=ours)):
            assert time.monotonic() < deadline, "no slow cell started within 300 s"
            time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole process group
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130 and "xpukit: interrupted" in stderr, stdout + stderr
    table = rows(stdout)
    assert sorted(table) == ["slow-acm-g10", "slow-pvc"] and "cancelled" in {r for r, _, _ in table.values()}
    assert all(r != "passed" for r, _, _ in table.values()), stdout
    run = next(out.glob("*/cells")).parent
    assert (out / "last").read_text().strip() == run.name  # --only-failed reruns them
    names = {c.name for c in docker_client.containers.list(all=True)}
    assert not {n for n in names if n.startswith(f"xpukit-matrix-{run.name}-")}, names
