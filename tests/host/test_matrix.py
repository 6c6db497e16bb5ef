"""`invoke matrix` without an engine: the matrix file, the cells, the cell script (real bash, real
signals), the sbatch script, and the Kubernetes Indexed Job validated with kubernetes-validate."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import ROOT
from xpukit.errors import XpukitError
from xpukit.host import settings
from xpukit.host.matrix import cells as mx
from xpukit.host.matrix import kubernetes
from xpukit.host.matrix import schedule as matrix_sched
from xpukit.host.versions import pins

pytestmark = pytest.mark.unit

CPU = pins.load().profile("cpu")
KUBERNETES_VERSION = "1.33.0"  # the oldest line with backoffLimitPerIndex generally available


def invoke(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args], cwd=ROOT, capture_output=True, text=True, env=env, check=False
    )


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "matrix.toml"
    path.write_text(text)
    return path


AXES = '[axes]\nur = ["pinned"]\ntarget = ["pvc"]\ntriton = ["default"]\n'


def test_default_matrix_has_at_least_four_cells_and_uses_the_pinned_ur():
    cells = mx.expand(mx.load_matrix(), CPU)
    names = [c.name for c in cells]
    assert len(names) >= 4 and len(set(names)) == len(names)
    pinned = CPU["ur"]["version"]
    assert f"demo-ur{pinned}" in names and "compile-pvc" in names and "compile-acm-g10" in names


def test_flags_narrow_the_axes_and_aliases_resolve():
    cells = mx.expand(mx.load_matrix(), CPU, suites="compile", targets="dg2,pvc")
    assert [c.name for c in cells] == ["compile-acm-g10", "compile-pvc"]
    ur = mx.expand(mx.load_matrix(), CPU, suites="demo", urs=f"pinned,{CPU['ur']['matrix'][0]}")
    assert [c.ur for c in ur] == [CPU["ur"]["version"], CPU["ur"]["matrix"][0]]


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"suites": "nope"}, "unknown suite 'nope'"),
        ({"urs": "2099.1.1"}, "UR release 2099.1.1 is not in cpu.ur.matrix"),
        ({"tritons": "blog"}, "Triton variant 'blog' is not one of the cpu profile's"),
        ({"targets": "nosuchgpu"}, "nosuchgpu"),
    ],
)
def test_bad_axis_values_are_one_error_with_a_fix(kwargs, needle):
    with pytest.raises(XpukitError) as info:
        mx.expand(mx.load_matrix(), CPU, **kwargs)
    assert needle in info.value.message and info.value.fix


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("schema = 1\n", "[axes] must set exactly"),
        ("schema = 2\n" + AXES + 'suite = ["demo"]\n', "schema must be 1"),
        ("schema = 1\n" + AXES + "suite = []\n", "axes.suite must be a non-empty list"),
        ("schema = 1\n" + AXES + 'suite = ["x"]\n[suites.x]\ncommand = "true"\n', "suites.x.command must be"),
        ("schema = 1\n" + AXES + 'suite = ["x"]\n[suites.x]\ncommand = ["true"]\naxes = ["gpu"]\n', "axes may name"),
        ("schema = 1\n[axes\n", "is not valid TOML"),
    ],
)
def test_bad_matrix_files_are_one_error(tmp_path, text, needle):
    with pytest.raises(XpukitError) as info:
        mx.load_matrix(write(tmp_path, text))
    assert needle in info.value.message


def test_custom_suite_placeholders_are_filled(tmp_path):
    path = write(tmp_path, "schema = 1\n" + AXES + 'suite = ["x"]\n[suites.x]\ncommand = ["echo", "{src}:{target}"]\n')
    (cell,) = mx.expand(mx.load_matrix(path), CPU)
    assert cell.name == "x" and cell.command_in_image("/w", "1") == ["echo", "/w:"]
    path = write(tmp_path, "schema = 1\n" + AXES + 'suite = ["x"]\n[suites.x]\ncommand = ["{nope}"]\n')
    (cell,) = mx.expand(mx.load_matrix(path), CPU)
    with pytest.raises(XpukitError, match="bad placeholder"):
        cell.command_in_image("/w", "1")


def test_another_ur_release_is_prepared_in_the_container_with_ur_matrix():
    release = CPU["ur"]["matrix"][0]
    (cell,) = mx.expand(mx.load_matrix(), CPU, suites="demo", urs=release)
    command = matrix_sched._in_image(cell, "/workspace", CPU["ur"]["version"])
    assert command[:2] == ["bash", "-c"] and "XPUKIT_UR_LOADER" in command[2]
    assert f"prepare_prefix({release!r})" in command[4] and "from tests.support.ur_matrix import" in command[4]
    assert command[5:] == [release, "python", "/workspace/examples/xpu_triton_ur.py"]
    assert "XPUKIT_EXPECT_UR_RELEASE" in command[2]
    (pinned,) = mx.expand(mx.load_matrix(), CPU, suites="demo")
    assert matrix_sched._in_image(pinned, "/workspace", CPU["ur"]["version"])[0] == "python"


# ---------------------------------------------------------------- the cell script, for real


def _script(tmp_path: Path, command: list[str]) -> tuple[mx.Cell, Path, Path]:
    cell = mx.Cell("probe", ("unused",), target="pvc")
    run = tmp_path / "run"
    folder = mx.cell_dir(run, cell)
    folder.mkdir(parents=True)
    script = folder / "run.sh"
    script.write_text(mx.cell_script(cell, folder, command, {"XPUKIT_PROBE": "a b"}, f"touch {folder}/cleaned"))
    return cell, run, script


@pytest.mark.parametrize(("code", "result"), [(0, "passed"), (3, "failed")])
def test_cell_script_writes_its_own_result_and_log(tmp_path, code, result):
    command = ["sh", "-c", f'echo "probe $XPUKIT_PROBE"; exit {code}']
    cell, run, script = _script(tmp_path, command)
    assert subprocess.run(["bash", str(script)], check=False).returncode == code
    outcome = mx.read_outcome(run, cell)
    assert (outcome.result, outcome.exit_code, outcome.passed) == (result, code, code == 0)
    assert outcome.log.read_text() == "probe a b\n" and outcome.seconds is not None


def test_a_terminated_cell_is_cancelled_never_passed(tmp_path):
    cell, run, script = _script(tmp_path, ["sleep", "30"])
    proc = subprocess.Popen(["bash", str(script)])
    folder = mx.cell_dir(run, cell)
    deadline = time.monotonic() + 10
    while not (folder / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 143
    outcome = mx.read_outcome(run, cell)
    assert outcome.result == "cancelled" and not outcome.passed
    assert (folder / "cleaned").exists()  # the cancel hook ran (it removes the cell's container)


def test_no_result_file_is_no_result(tmp_path):
    cell = mx.Cell("probe", ("x",))
    folder = mx.cell_dir(tmp_path, cell)
    folder.mkdir(parents=True)
    assert mx.read_outcome(tmp_path, cell).detail == "never started"
    (folder / "started").write_text("node1\n")
    assert "never finished" in mx.read_outcome(tmp_path, cell).detail
    (folder / "result.json").write_text(json.dumps({"cell": "other", "result": "passed"}))
    assert not mx.read_outcome(tmp_path, cell).passed


def test_table_has_a_row_per_cell_with_result_time_and_log(tmp_path):
    a, b = mx.Cell("demo", ("x",), ur="1"), mx.Cell("compile", ("x",), target="pvc")
    outcomes = [
        mx.Outcome(a, "passed", 1.25, tmp_path / "a" / "log", 0),
        mx.Outcome(b, "failed", 3.0, tmp_path / "b" / "log", 2),
    ]
    assert mx.table(outcomes, tmp_path).splitlines() == [
        "| cell        | result          | time  | log   |",
        "|-------------|-----------------|-------|-------|",
        "| demo-ur1    | passed          | 1.2 s | a/log |",
        "| compile-pvc | failed (exit 2) | 3.0 s | b/log |",
    ]


def test_sbatch_script_is_one_throttled_array(tmp_path):
    cells = [mx.Cell("demo", ("x",), ur="1"), mx.Cell("compile", ("x",), target="pvc")]
    scripts = {c.name: tmp_path / c.name / "run.sh" for c in cells}
    prepared = matrix_sched.Prepared(tmp_path, tmp_path, cells, scripts)
    text = matrix_sched.sbatch_script(prepared, 1, ["--partition=pvc"])
    assert "#SBATCH --array=0-1%1\n" in text and "#SBATCH --partition=pvc\n" in text
    assert f"#SBATCH --output={tmp_path}/slurm-%a.out" in text
    # bash picks task i's script: run the array line by hand for index 1
    out = subprocess.run(
        ["bash", "-c", text.replace('exec bash "', 'echo "'), "sbatch"],
        env={**os.environ, "SLURM_ARRAY_TASK_ID": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == str(scripts["compile-pvc"])


# ---------------------------------------------------------------- Kubernetes


def _ctx(profile: str) -> settings.Context:
    return settings.make_context({"profile": profile}, None)


def test_kubernetes_manifest_is_a_valid_indexed_job(tmp_path):
    kv = pytest.importorskip("kubernetes_validate")  # in env/lock/host.txt
    cells = mx.expand(mx.load_matrix(), CPU)
    opts = matrix_sched.Options(scheduler="kubernetes", image="registry.example/xpukit@sha256:" + "a" * 64)
    manifest = kubernetes.k8s_manifest(_ctx("cpu"), cells, "20261201-000000-abcd", opts)
    spec = manifest["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == len(cells)
    kv.validate(manifest, KUBERNETES_VERSION, strict=True)
    with pytest.raises(kv.ValidationError, match="backoffLimitPerIndex"):
        kv.validate(manifest, "1.27.0", strict=True)  # the validator can fail: 1.27 has no per-index limit
    script = spec["template"]["spec"]["containers"][0]["command"][2]
    for index, cell in enumerate(cells):
        assert f"  {index}) name={cell.name};" in script
    # the same through the command line: `--out FILE`, then the validator's own CLI on it
    out = tmp_path / "job.yaml"
    image = "--image=registry.example/xpukit@sha256:" + "b" * 64
    args = ["matrix", "--scheduler", "kubernetes", "--profile", "cpu", image, "--out", str(out)]
    result = invoke(*args)
    assert result.returncode == 0, result.stderr
    validator = Path(sys.executable).parent / "kubernetes-validate"
    checked = subprocess.run(
        [str(validator), "--strict", "-k", KUBERNETES_VERSION, str(out)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0 and "INFO" in checked.stdout, checked.stdout + checked.stderr


def test_xpu_manifest_asks_for_the_gpu_device_plugin():
    kv = pytest.importorskip("kubernetes_validate")
    xpu = pins.load().profile("xpu")
    cells = mx.expand(mx.load_matrix(), xpu, suites="compile", targets="pvc")
    for resource in matrix_sched.GPU_RESOURCES:
        opts = matrix_sched.Options(image="r.example/x@sha256:" + "c" * 64, gpu_resource=resource)
        manifest = kubernetes.k8s_manifest(_ctx("xpu"), cells, "r1", opts)
        container = manifest["spec"]["template"]["spec"]["containers"][0]
        assert container["resources"]["limits"] == {resource: 1}
        assert {"name": "ONEAPI_DEVICE_SELECTOR", "value": "level_zero:gpu"} in container["env"]
        kv.validate(manifest, KUBERNETES_VERSION, strict=True)


def test_kubernetes_needs_an_image_by_digest():
    with pytest.raises(XpukitError, match="not pinned by digest"):
        kubernetes.k8s_image(_ctx("cpu"), "registry.example/xpukit:cpu")


def test_apply_without_a_cluster_is_one_error(tmp_path):
    image = "--image=registry.example/xpukit@sha256:" + "d" * 64
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "none")}
    result = invoke("matrix", "--scheduler", "kubernetes", "--profile", "cpu", image, "--apply", env=env)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and ("kubectl" in errors[0]), result.stderr


def test_only_failed_without_an_earlier_run_is_one_error(tmp_path):
    result = invoke("matrix", "--only-failed", "--out-dir", str(tmp_path))
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "no earlier run in" in result.stderr and "fix:" in result.stderr


def test_apptainer_cells_use_level_zero_gpus_and_a_rank_affinity(tmp_path):
    """The Aurora pattern as a generated line (no Apptainer here): run it as a shell would, with an
    `apptainer` on PATH that prints what it was given."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "apptainer").write_text('#!/bin/sh\necho "mask=$APPTAINERENV_ZE_AFFINITY_MASK"; printf "%s\\n" "$@"\n')
    (fake / "apptainer").chmod(0o755)
    (cell,) = mx.expand(mx.load_matrix(), pins.load().profile("xpu"), suites="demo")
    options = {"volumes": {"/data": {"bind": "/workspace", "mode": "ro"}, "xpukit-cache": {"bind": "/c"}}}
    options["environment"], options["working_dir"] = {"PYTHONPATH": "/workspace"}, "/workspace"
    line = matrix_sched.apptainer_line("/s/x.sif", ["python", "demo.py"], options, gpu=True)
    folder = tmp_path / "cell"
    folder.mkdir()
    script = mx.cell_script(cell, folder, line, {}, ":", f"export {matrix_sched.AFFINITY}\n")
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "PALS_LOCAL_RANKID": "3"}
    env.pop("ZE_AFFINITY_MASK", None)
    assert subprocess.run(["bash", "-c", script], env=env, check=False).returncode == 0
    args = (folder / "log").read_text().splitlines()
    assert args[0] == "mask=3" and args[1:4] == ["exec", "--cleanenv", "--bind"]
    assert "/data:/workspace:ro" in args and "xpukit-cache:/c:rw" not in args  # a named volume has no path
    assert "--env=ONEAPI_DEVICE_SELECTOR=level_zero:gpu" in args and args[-3:] == ["/s/x.sif", "python", "demo.py"]


# ---------------------------------------------------------------- Slurm's records, --image on the nodes

# What `squeue -h -r -t all -j 11 -o "%K %T %N"` printed from Slurm 22.05 for an array job (.ci/slurm.sh):
# one line per task, pending ones expanded, finished ones with the node they ran on.
SQUEUE = "0 COMPLETED xpk-n2\n1 NODE_FAIL xpk-n1\n2 PENDING \n3 PENDING \n"


def _squeue(tmp_path: Path, stdout: str, stderr: str = "", code: int = 0) -> str:
    """An `squeue` that answers as Slurm's does (the real one is run by tests/engine/test_matrix_*.py)."""
    tool = tmp_path / "squeue"
    tool.write_text(f"#!/bin/sh\nprintf %s {shlex.quote(stdout)}\nprintf %s {shlex.quote(stderr)} >&2\nexit {code}\n")
    tool.chmod(0o755)
    return str(tool)


def test_squeue_lines_become_one_record_per_task(tmp_path):
    assert matrix_sched.slurm_records(_squeue(tmp_path, SQUEUE), "11") == {
        0: mx.SchedulerRecord("COMPLETED", "xpk-n2"),
        1: mx.SchedulerRecord("NODE_FAIL", "xpk-n1"),
        2: mx.SchedulerRecord("PENDING", ""),
        3: mx.SchedulerRecord("PENDING", ""),
    }
    forgotten = _squeue(tmp_path, "", "slurm_load_jobs error: Invalid job id specified\n", 1)
    assert matrix_sched.slurm_records(forgotten, "11") == {}  # Slurm no longer has the job: it is over
    assert matrix_sched.slurm_records(_squeue(tmp_path, "", "connection refused\n", 1), "11") is None


def test_a_cell_whose_node_failed_is_lost_never_passed(tmp_path):
    cell = mx.Cell("compile", ("x",), target="pvc")
    folder = mx.cell_dir(tmp_path, cell)
    folder.mkdir(parents=True)
    (folder / "started").write_text("xpk-n1\n")
    lost = mx.read_outcome(tmp_path, cell, mx.SchedulerRecord("NODE_FAIL", "xpk-n1"))
    assert (lost.result, lost.detail, lost.passed) == ("lost", "Slurm: NODE_FAIL on xpk-n1", False)
    cancelled = mx.read_outcome(tmp_path, cell, mx.SchedulerRecord("CANCELLED", "xpk-n1"))
    assert cancelled.result == "no result" and cancelled.detail.endswith("; Slurm: CANCELLED on xpk-n1")
    # the cell's own file wins over the scheduler's record
    (folder / "result.json").write_text(json.dumps({"cell": cell.name, "result": "failed", "exit_code": 125,
                                                    "seconds": 0.5, "detail": "xpk-n1: cannot pull x"}))  # fmt: skip
    failed = mx.read_outcome(tmp_path, cell, mx.SchedulerRecord("NODE_FAIL", "xpk-n1"))
    assert (failed.result, failed.detail) == ("failed", "xpk-n1: cannot pull x")
    assert "| failed (exit 125): xpk-n1: cannot pull x |" in mx.table([failed]).replace("  ", "")


def test_the_cell_script_puts_its_why_line_in_the_result(tmp_path):
    cell = mx.Cell("compile", ("x",), target="pvc")
    line = ["bash", "-c", 'echo "xpukit: no registry \\"r\\" here" | tee why >&2; exit 125']
    script = tmp_path / "run.sh"
    script.write_text(mx.cell_script(cell, tmp_path, line, {}))
    assert subprocess.run(["bash", str(script)], check=False).returncode == 125
    data = json.loads((tmp_path / "result.json").read_text())
    assert (data["result"], data["exit_code"], data["detail"]) == ("failed", 125, "xpukit: no registry r here")
    assert (tmp_path / "log").read_text() == 'xpukit: no registry "r" here\n'


def test_sbatch_script_asks_slurm_not_to_requeue(tmp_path):
    cells = [mx.Cell("demo", ("x",), ur="1")]
    prepared = matrix_sched.Prepared(tmp_path, tmp_path, cells, {cells[0].name: tmp_path / "run.sh"})
    assert "#SBATCH --no-requeue\n" in matrix_sched.sbatch_script(prepared, 0, [])


DIGEST_REF = "r.example:5000/xpukit/cpu@sha256:" + "d" * 64


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"scheduler": "local", "image": DIGEST_REF}, "--image is for --scheduler slurm"),
        ({"scheduler": "slurm", "runtime": "charliecloud", "image": DIGEST_REF}, "with --runtime charliecloud"),
        ({"scheduler": "slurm", "image": "r.example/xpukit/cpu:latest"}, "is not pinned by digest"),
        ({"scheduler": "slurm", "node_engine": "podman"}, "--node-engine needs --image"),
        ({"scheduler": "slurm", "image": DIGEST_REF, "node_engine": "crun"}, "node-engine"),
    ],
)
def test_image_for_the_nodes_is_checked(fields, message):
    with pytest.raises(XpukitError, match=re.escape(message)):
        matrix_sched.check_pulled(matrix_sched.Options(**fields), ["default"])
    matrix_sched.check_pulled(matrix_sched.Options(scheduler="slurm", image=DIGEST_REF), ["default"])
    with pytest.raises(XpukitError, match="one per Triton variant"):
        matrix_sched.check_pulled(matrix_sched.Options(scheduler="slurm", image=DIGEST_REF), ["default", "x"])


def test_options_are_built_by_name_and_every_flag_reaches_one():
    with pytest.raises(TypeError):
        matrix_sched.Options("slurm")  # type: ignore[misc]  # positional: refused
    import inspect

    import tasks

    flags = set(inspect.signature(tasks.matrix.body).parameters)
    renamed = {"matrix_file": "file", "suites": "suite", "targets": "target", "urs": "ur", "tritons": "triton",
               "manifest_out": "out"}  # fmt: skip
    fields = {renamed.get(f.name, f.name) for f in dataclasses.fields(matrix_sched.Options)}
    assert fields <= flags, fields - flags
