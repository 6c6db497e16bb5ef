"""`invoke matrix --scheduler slurm` across three hosts: a controller and two compute nodes in network
namespaces on this machine (tests/support/nscluster.py), each with its own address, munged, Slurm
daemon and podman store, one munge key, the registry on the controller's address.

The kit's image is copied once from the engine into the cluster's registry; every node pulls it BY
DIGEST into its own store and never builds. `invoke matrix` runs on the controller (in its network
namespace) and prints the table there. Faults, for real: a node killed mid-run (SIGKILL to every
process in it: slurmd, munged, the cell and its container), the registry refused to one node
(iptables in that node's namespace), and an image of another digest. Each test says what Slurm's
own records (``scontrol show job``; no accounting storage here) show.

The cells are small on purpose: compiles of one kernel, and a cell that holds until the test
releases it (a file in its folder), so the kill lands while a cell runs, without a fixed sleep.
Needs root, iproute2, slurm-wlm, munge, podman, skopeo and docker-registry; skips without them,
unless XPUKIT_REQUIRE_SLURM=1 (CI) makes that a failure.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support import nscluster as ns

pytestmark = pytest.mark.docker

HOLD = (
    "import os, time\nprint('holding', flush=True)\n"
    "while not os.path.exists('/results/release'):\n    time.sleep(0.2)\nprint('released', flush=True)\n"
)
MATRIX = f"""schema = 1
[axes]
ur = ["pinned"]
target = ["pvc", "bmg"]
triton = ["default"]
suite = ["compile", "hold"]
[suites.hold]
command = ["python", "-c", {json.dumps(HOLD)}]
axes = ["target"]
"""
ROW = re.compile(r"^\| (\S+) +\| ([a-z ]+?)(?: \(exit (\d+)\))?(?:: ([^|]*?))? +\| ([0-9.]+ s|-) +\| (\S+) +\|$")


def required(what: str) -> None:
    if os.environ.get("XPUKIT_REQUIRE_SLURM") == "1":
        pytest.fail(f"XPUKIT_REQUIRE_SLURM=1 but this needs {what}")
    pytest.skip(f"needs {what}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, docker_client) -> Iterator[ns.Cluster]:
    if os.geteuid() != 0:
        required("root (network namespaces, mounts, slurmd)")
    if ns.missing_tools():
        required(", ".join(ns.missing_tools()))
    if not Path("/usr/bin/skopeo").exists():
        required("skopeo (apt-get install skopeo)")
    # munge's socket path has a length limit: a short folder of its own
    root = Path(subprocess.run(["mktemp", "-d", "/tmp/xpk-ns.XXXX"], capture_output=True, text=True).stdout.strip())
    cluster = ns.new_cluster(root)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        left = ns.leftovers(cluster)
        subprocess.run(["rm", "-rf", str(root)], check=False)
        assert not left, f"the cluster left these behind: {left}"


@pytest.fixture(scope="module")
def pushed(cluster, test_image, docker_client) -> str:
    """The kit's image in the cluster's registry; its reference by digest."""
    started = time.monotonic()
    digest = ns.push_image(cluster, test_image, "xpukit/cpu", docker_host())
    print(f"\nnscluster: the image copied into the registry in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return f"{cluster.registry}/xpukit/cpu@{digest}"


def docker_host() -> str:
    return os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")


def matrix_on_controller(cluster: ns.Cluster, *args: str, wait: bool = True):
    """`invoke matrix --scheduler slurm` on the controller (its network namespace)."""
    cmd = cluster.exec_line("ctl", sys.executable, "-m", "invoke", "matrix", "--scheduler", "slurm", *args)
    env = {
        **os.environ,
        **cluster.env,
        "XPUKIT_PROFILE": "cpu",
        "XPUKIT_ENGINE": "docker",
        "DOCKER_HOST": docker_host(),
    }
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if not wait:
        return proc
    stdout, stderr = proc.communicate(timeout=900)
    return proc.returncode, stdout, stderr


def table(stdout: str) -> dict[str, dict[str, str]]:
    found = {}
    for line in stdout.splitlines():
        match = ROW.match(line)
        if match and match.group(1) != "cell":
            found[match.group(1)] = {
                "result": match.group(2),
                "exit": match.group(3) or "",
                "detail": match.group(4) or "",
            }
    return found


def slurm_nodes(cluster: ns.Cluster, run: Path) -> dict[int, tuple[str, str]]:
    """Array task index -> (JobState, NodeList), from Slurm itself (``scontrol show job``)."""
    job = (run / "slurm-job").read_text().strip()
    proc = subprocess.run(
        cluster.exec_line("ctl", "scontrol", "-o", "show", "job", job),
        capture_output=True, text=True, check=True, env={**os.environ, **cluster.env},
    )  # fmt: skip
    found = {}
    for line in proc.stdout.splitlines():
        fields = dict(p.split("=", 1) for p in line.split() if "=" in p)
        if fields.get("ArrayTaskId", "").isdigit():
            found[int(fields["ArrayTaskId"])] = (fields["JobState"], fields["NodeList"])
    return found


def wait_for(what: str, check, timeout: float = 600):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    pytest.fail(f"{what}: not within {timeout:.0f} s")


def holding_cell(out: Path, besides: Path | None = None) -> Path | None:
    """A hold cell that says it is holding and was not released (other than ``besides``)."""
    for log in out.glob("*/cells/hold-*/log"):
        if log.parent == besides:
            continue
        if "holding" in log.read_text(errors="replace") and not (log.parent / "release").exists():
            return log.parent
    return None


def node_images(cluster: ns.Cluster, node: str) -> list[tuple[str, list[str]]]:
    """(image ID, its digests) of every image in the node's own podman store."""
    proc = cluster.podman(node, "images", "--no-trunc", "--format", "{{.ID}} {{.Digest}}")
    assert proc.returncode == 0, proc.stderr
    found = [line.split() for line in proc.stdout.splitlines() if line.strip()]
    return [(parts[0].removeprefix("sha256:"), parts[1:]) for parts in found]


def test_cells_land_on_both_nodes_a_killed_node_is_lost_and_the_rerun_completes(
    cluster, pushed, docker_client, test_image, tmp_path
):
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(MATRIX)
    out = tmp_path / "runs"
    image_id = docker_client.images.get(test_image).id
    digest = pushed.split("@")[1]
    args = ("--image", pushed, "--node-engine", "podman", "--out-dir", str(out), "--timeout", "800")
    proc = matrix_on_controller(cluster, "--file", str(matrix), *args, wait=False)
    try:
        # The first hold cell to run marks its node for death; the kill lands while it runs.
        cell = wait_for("a hold cell running", lambda: holding_cell(out))
        victim = (cell / "started").read_text().strip()
        node = victim.removeprefix("xpk-")
        assert node in ns.NODES, victim
        images = node_images(cluster, node)
        assert [i for i, _ in images] == [image_id.removeprefix("sha256:")], images  # pulled, never built
        assert any(d == digest for _, ds in images for d in ds), images
        killed = cluster.kill_host(node)
        assert killed and not cluster.pids(node)  # slurmd, munged, the cell, its container: gone
        # the other hold cell (on the surviving node) is let go
        other = wait_for("the other hold cell", lambda: holding_cell(out, besides=cell), timeout=300)
        (other / "release").write_text("")
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, stdout + stderr[-3000:]
    rows = table(stdout)
    assert sorted(rows) == ["compile-bmg", "compile-pvc", "hold-bmg", "hold-pvc"], stdout
    assert rows[cell.name]["result"] == "lost" and f"NODE_FAIL on {victim}" in rows[cell.name]["detail"], stdout
    run = cell.parents[1]
    failed = {n: (run / "cells" / n / "log").read_text()[-1500:] for n, r in rows.items() if r["result"] == "failed"}
    assert all(r["result"] == "passed" for n, r in rows.items() if n != cell.name), (stdout, failed)
    # Slurm's own records: cells on both nodes, the killed node's task NODE_FAIL, the rest COMPLETED
    records = slurm_nodes(cluster, run)
    cells = [c["name"] for c in json.loads((run / "cells.json").read_text())["cells"]]
    assert {n for _, n in records.values()} == {cluster.hostname(n) for n in ns.NODES}, records
    for index, (state, where) in records.items():
        if cells[index] == cell.name:
            assert (state, where) == ("NODE_FAIL", victim), records
        else:
            assert state == "COMPLETED", records
            assert json.loads((run / "cells" / cells[index] / "result.json").read_text())["host"] == where
    assert json.loads((run / "slurm-states.json").read_text())[cell.name] == {"state": "NODE_FAIL", "node": victim}
    survivor = next(n for n in ns.NODES if n != node)
    assert [i for i, _ in node_images(cluster, survivor)] == [image_id.removeprefix("sha256:")]

    # --only-failed: the lost cell again, on the surviving node; the table completes
    proc = matrix_on_controller(cluster, "--only-failed", *args, wait=False)
    try:
        again = wait_for("the lost cell rerun", lambda: holding_cell(out, besides=cell), timeout=300)
        assert again.name == cell.name and again != cell
        (again / "release").write_text("")
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stdout + stderr[-3000:]
    assert {n: r["result"] for n, r in table(stdout).items()} == {cell.name: "passed"}, stdout
    assert slurm_nodes(cluster, again.parents[1]) == {0: ("COMPLETED", cluster.hostname(survivor))}

    cluster.start_host(node)  # the node comes back (ReturnToService=2) for the tests after this one
    cluster.wait_nodes(idle=ns.NODES, timeout=90)


def test_a_node_cut_from_the_registry_fails_its_cells_naming_the_registry(cluster, pushed, tmp_path):
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(MATRIX)
    out = tmp_path / "runs"
    cut = "n2"
    for image_id, _ in node_images(cluster, cut):  # n2 must go to the registry for the image
        assert cluster.podman(cut, "rmi", "-f", image_id).returncode == 0
    cluster.cut_registry(cut)
    try:
        code, stdout, stderr = matrix_on_controller(
            cluster, "--file", str(matrix), "--suite", "compile", "--image", pushed, "--node-engine", "podman",
            "--out-dir", str(out), "--timeout", "600",
        )  # fmt: skip
    finally:
        cluster.mend_registry(cut)
    rows = table(stdout)
    assert code == 1 and sorted(rows) == ["compile-bmg", "compile-pvc"], stdout + stderr[-3000:]
    run = next(out.glob("*/cells")).parent
    records = slurm_nodes(cluster, run)
    cells = [c["name"] for c in json.loads((run / "cells.json").read_text())["cells"]]
    on_cut = [cells[i] for i, (_, where) in records.items() if where == cluster.hostname(cut)]
    assert on_cut, f"no cell landed on {cut}: {records}"
    for name, row in rows.items():
        if name in on_cut:
            assert row["result"] == "failed" and row["exit"] == "125", stdout
            line = f"xpk-{cut}: cannot pull {pushed} from the registry {cluster.registry}: "
            assert row["detail"].startswith(line), row
            log = (run / "cells" / name / "log").read_text()
            assert log.count("\n") == 1 and log.startswith("xpukit: " + line), log  # one line, the registry named
        else:
            assert row["result"] == "passed", stdout


def test_an_image_of_another_digest_is_refused_on_the_node(cluster, docker_client, tmp_path):
    """The base image pushed under the kit's repository stands for a stale or foreign image: the
    node pulls it by the digest it was given, and refuses to run it (its ID is not the run's)."""
    other = ns.push_image(cluster, "xpukit-base:bookworm-slim", "xpukit/cpu", docker_host())
    reference = f"{cluster.registry}/xpukit/cpu@{other}"
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(MATRIX)
    out = tmp_path / "runs"
    code, stdout, stderr = matrix_on_controller(
        cluster, "--file", str(matrix), "--suite", "compile", "--image", reference, "--node-engine", "podman",
        "--out-dir", str(out), "--timeout", "600",
    )  # fmt: skip
    rows = table(stdout)
    assert code == 1 and sorted(rows) == ["compile-bmg", "compile-pvc"], stdout + stderr[-3000:]
    base_id = docker_client.images.get("xpukit-base:bookworm-slim").id
    for row in rows.values():
        assert row["result"] == "failed" and row["exit"] == "125", stdout
        assert row["detail"].endswith("(the image this run expects): refused") and base_id in row["detail"], row
    assert "refused" in stderr or "refused" in stdout


def test_the_cluster_leaves_nothing_behind(tmp_path_factory):
    """A cluster of its own, a job on each node, a node killed, then stopped: no namespace, link,
    mount or process of it is left on the machine."""
    if os.geteuid() != 0:
        required("root (network namespaces, mounts, slurmd)")
    if ns.missing_tools():
        required(", ".join(ns.missing_tools()))
    root = Path(subprocess.run(["mktemp", "-d", "/tmp/xpk-ns.XXXX"], capture_output=True, text=True).stdout.strip())
    cluster = ns.new_cluster(root)
    try:
        cluster.start()
        script = root / "job.sh"
        script.write_text("#!/bin/bash\nhostname\nsleep 300\n")
        env = {**os.environ, **cluster.env}
        subprocess.run(cluster.exec_line("ctl", "sbatch", "--array=0-1", "-o", f"{root}/out-%a", str(script)),
                       check=True, env=env, capture_output=True)  # fmt: skip
        wait_for(
            "both tasks running", lambda: all(cluster.sinfo().get(cluster.hostname(n)) == "alloc" for n in ns.NODES), 60
        )
        assert [p for n in ns.NODES for p in cluster.pids(n)]
        cluster.kill_host("n1")
        assert ns.leftovers(cluster)  # the check sees a running cluster
    finally:
        cluster.stop()
    left = ns.leftovers(cluster)
    subprocess.run(["rm", "-rf", str(root)], check=False)
    assert left == []
