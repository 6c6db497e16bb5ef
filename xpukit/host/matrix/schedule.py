"""Where the matrix cells run: ``local`` (this engine, cells in parallel bounded by cores),
``slurm`` (one ``sbatch --array`` job), ``kubernetes`` (an Indexed Job manifest, kubernetes.py). Each cell runs
through the container runtime the site has: the kit's engine (Docker or podman, the image by its
exact ID) or charliecloud (the image converted once into a directory, ``ch-run``).
Results are read from the cells' own files, never from the scheduler's accounting."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from xpukit import layout
from xpukit.errors import XpukitError
from xpukit.host import inputs, processes, ui
from xpukit.host.image import sharing, trust
from xpukit.host.image.build import Variant
from xpukit.host.image.plan import ensure_image, make_plan
from xpukit.host.matrix import cells as mx
from xpukit.host.run import containers, testing
from xpukit.host.settings import Context, check_choice

SCHEDULERS = ("local", "slurm", "kubernetes")
RUNTIMES = ("engine", "charliecloud", "apptainer")
IMAGE_SRC = layout.SRC  # the kit's source inside the image (Kubernetes: no checkout mount)
GPU_RESOURCES = ("gpu.intel.com/i915", "gpu.intel.com/xe")
POLL = 0.5  # seconds between looks at the cells' files


@dataclasses.dataclass(kw_only=True)
class Options:
    """`invoke matrix`'s flags, built by name (tasks.py): 19 fields of which many are strings."""

    scheduler: str = "local"
    runtime: str = "engine"
    matrix_file: str = ""
    suites: str = ""
    targets: str = ""
    urs: str = ""
    tritons: str = ""
    out_dir: str = ""
    only_failed: bool = False
    jobs: int = 0  # local: cells at once (0: the number of cores)
    throttle: int = 0  # slurm/kubernetes: array tasks / pods at once (0: all)
    sbatch_args: str = ""  # more sbatch options, quoted (a partition, an account, a time limit)
    manifest_out: str = ""  # kubernetes: write the manifest here
    apply: bool = False  # kubernetes: kubectl apply it
    image: str = ""  # kubernetes, slurm: the image by digest (kubernetes' default: env/lock/images.toml's entry)
    node_engine: str = ""  # slurm with --image: the engine on the nodes (default: the kit's engine's kind)
    gpu_resource: str = GPU_RESOURCES[0]
    sif: str = ""  # apptainer: the SIF built with `apptainer build --fakeroot`
    timeout: float = 0  # seconds to wait for all cells (0: no limit)


# ---------------------------------------------------------------- images


def resolve_images(ctx: Context, tritons: list[str]) -> dict[str, tuple[str, str]]:
    """triton value -> (content tag, the exact image ID to run); a dry run without the image has
    its content tag for both."""
    images: dict[str, tuple[str, str]] = {}
    for triton in tritons:
        variant = Variant() if triton == mx.DEFAULT_TRITON else Variant(triton=triton)
        plan = make_plan(ctx, variant, base_required=False)
        if not ctx.engine.present:  # a dry run where no engine answers
            images[triton] = (plan.tag, plan.tag)
            continue
        if triton == mx.DEFAULT_TRITON and not ctx.dry_run:
            ensure_image(plan, ctx.engine, functools.partial(sharing.shared_image, ctx, plan))
        if not ctx.engine.image_exists(plan.tag):
            if ctx.dry_run:
                images[triton] = (plan.tag, plan.tag)
                continue
            raise XpukitError(
                f"no image {plan.tag} for Triton variant {triton}", f"build it: invoke build --triton {triton}"
            )
        images[triton] = (plan.tag, str(ctx.engine.client().images.get(plan.tag).id))
    return images


# ---------------------------------------------------------------- one cell's command line


def _in_image(cell: mx.Cell, src: str, pinned_ur: str) -> list[str]:
    """The cell's command in the image; another UR release is prepared there first, with pip
    (tests/support/ur_matrix.py's prepare_prefix, cached under the cache volume), and used through
    XPUKIT_UR_LOADER."""
    version = cell.ur if cell.ur not in ("", mx.PINNED, pinned_ur) else ""
    command = cell.command_in_image(src, cell.ur or pinned_ur)
    if not version:
        return command
    prepare = (
        f"import sys; sys.path.insert(0, {src!r}); from tests.support.ur_matrix import loader_in, prepare_prefix; "
        f"print(loader_in(prepare_prefix({version!r})))"
    )
    # XPUKIT_EXPECT_UR_RELEASE: the binding tests (container-tests) check the loader is that release.
    script = (
        'XPUKIT_UR_LOADER="$(python -c "$1")" || exit 1; export XPUKIT_UR_LOADER XPUKIT_EXPECT_UR_RELEASE="$2"; '
        'shift 2; exec "$@"'
    )
    return ["bash", "-c", script, "xpukit-ur", prepare, version, *command]


def cell_options(ctx: Context, folder: Path) -> dict[str, Any]:
    """The kit's container options (xpukit/host/run/containers.py: checkout, cache volume, GPU, and
    whatever else every task's containers get), plus the cell's folder at /results and the CA
    bundle the UR matrix's pip needs."""
    env = {name: os.environ[name] for name in testing.PASS_THROUGH if os.environ.get(name)}
    options = containers.container_options(ctx, env)
    options["volumes"][str(folder)] = {"bind": mx.RESULTS, "mode": "rw"}
    ca = trust.ca_bundle(ctx)
    if ca.path:
        options["volumes"][ca.path] = {"bind": testing.CA_IN_CONTAINER, "mode": "ro"}
        options["environment"].update({"PIP_CERT": testing.CA_IN_CONTAINER, "SSL_CERT_FILE": testing.CA_IN_CONTAINER})
    return options


def engine_line(cli: str, image: str, command: list[str], options: dict[str, Any], name: str) -> list[str]:
    """`docker run` / `podman run` for the cell, the container named so a cancel can remove it."""
    line = processes.format_run_cli(cli, image, command, options)
    return [*line[:3], "--name", name, *line[3:]]


def ch_run_line(image_dir: Path, command: list[str], options: dict[str, Any]) -> list[str]:
    """The same cell through charliecloud: the host paths bound, named volumes dropped (no engine
    to hold them: caches go to /tmp), the image's environment then the kit's."""
    line = ["ch-run", "--unset-env=*", "--set-env"]
    for host_path, spec in (options.get("volumes") or {}).items():
        if host_path.startswith("/"):
            line.append(f"--bind={host_path}:{spec['bind']}")
    env = {**(options.get("environment") or {}), **layout.NO_HOME_ENV}
    line += [f"--set-env={k}={v}" for k, v in env.items()]
    if options.get("working_dir"):
        line.append(f"--cd={options['working_dir']}")
    return [*line, str(image_dir), "--", *command]


# A cell that gets its image from the registry on the node it lands on (slurm with --image): the
# node's own engine pulls REFERENCE (repository@digest) unless its store already holds it, and
# refuses an image whose ID is not the one the run expects; then it runs it. A failure is one line
# in the cell's `why` (result.json's detail) and its log, exit 125 (the engine's own "could not run").
PULL_AND_RUN = r"""ref=$1 want=$2 registry=$3; shift 3
node=$(hostname -s)
say() { echo "$node: $1" >why; echo "xpukit: $node: $1" >&2; exit 125; }
inspect() { "$1" image inspect --format '{{.Id}}' "$ref" 2>/dev/null; }
have=$(inspect "$1") || {
  out=$("$1" pull -q "$ref" 2>&1) ||
    say "cannot pull $ref from the registry $registry: $(printf '%s' "$out" | tail -n 1)"
  have=$(inspect "$1") || say "pulled $ref from the registry $registry, and $1 cannot find it"
}
[[ sha256:${have#sha256:} == "$want" ]] ||
  say "$ref is image sha256:${have#sha256:} here, not $want (the image this run expects): refused"
limits=()
if [[ $(basename "$1") == podman ]]; then
  # podman's container defaults (nofile 1048576, nproc 4194304) can exceed what podman itself may
  # give: it raises its open files to the hard limit and caps its own processes at 32768 (podman
  # 4.3, /proc/<podman>/limits), and a container gets no more than podman has.
  nofile=$(ulimit -Hn) nproc=$(ulimit -Hu)
  [[ $nproc =~ ^[0-9]+$ ]] && ((nproc < 32768)) || nproc=32768
  [[ $nofile =~ ^[0-9]+$ ]] && limits+=(--ulimit "nofile=$nofile:$nofile")
  limits+=(--ulimit "nproc=$nproc:$nproc")
fi
exec "$1" "$2" "${limits[@]}" "${@:3}"
"""


def registry_line(reference: str, image_id: str, run_line: list[str]) -> list[str]:
    """``run_line`` (an engine's ``run`` of ``reference``) behind :data:`PULL_AND_RUN`."""
    registry = reference.split("/", 1)[0]
    return ["bash", "-c", PULL_AND_RUN, "xpukit-pull", reference, image_id, registry, *run_line]


# The local rank's GPU (tile) for Level Zero: PBS/PALS (Aurora), else Slurm, else the first.
AFFINITY = 'APPTAINERENV_ZE_AFFINITY_MASK="${ZE_AFFINITY_MASK:-${PALS_LOCAL_RANKID:-${SLURM_LOCALID:-0}}}"'


def apptainer_line(sif: str, command: list[str], options: dict[str, Any], gpu: bool) -> list[str]:
    """The cell through Apptainer: a clean environment, the host paths bound, the kit's variables,
    and on a GPU profile Level Zero's GPUs only (``ONEAPI_DEVICE_SELECTOR``); ``ZE_AFFINITY_MASK``
    comes from the script's prelude (:data:`AFFINITY`). Apptainer shares /dev, so the GPU is there."""
    line = ["apptainer", "exec", "--cleanenv"]
    for host_path, spec in (options.get("volumes") or {}).items():
        if host_path.startswith("/"):
            line += ["--bind", f"{host_path}:{spec['bind']}:{spec.get('mode', 'rw')}"]
    env = {**(options.get("environment") or {}), **layout.NO_HOME_ENV}
    if gpu:
        env["ONEAPI_DEVICE_SELECTOR"] = "level_zero:gpu"
    line += [f"--env={k}={v}" for k, v in env.items()]
    if options.get("working_dir"):
        line += ["--pwd", options["working_dir"]]
    return [*line, sif, *command]


def charliecloud_image(ctx: Context, tag: str, image_id: str, store: Path) -> Path:
    """The image unpacked once for ch-run: ``ch-convert -i docker|podman TAG DIR`` (ch-convert takes
    no image IDs; the content tag names that one image), cached by image ID, with the mount
    points the kit binds made in it."""
    target = charliecloud_dir(store, image_id)
    if (target / ".xpukit-complete").exists():
        return target
    ch_convert = shutil.which("ch-convert")
    if ch_convert is None:
        raise XpukitError("--runtime charliecloud needs ch-convert and ch-run", "apt-get install charliecloud")
    store.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(target, ignore_errors=True)
    env = {**os.environ, **ctx.engine.build_env()}
    kind = "podman" if ctx.engine.kind == "podman" else "docker"
    cmd = [ch_convert, "-i", kind, "-o", "dir", tag, str(target)]
    ui.say(f"charliecloud: {shlex.join(cmd)}")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise XpukitError(f"ch-convert failed: {tail[0]}", "check that the engine has the image and the disk has room")
    for mount in (containers.WORKSPACE, mx.RESULTS, os.path.dirname(testing.CA_IN_CONTAINER)):
        (target / mount.lstrip("/")).mkdir(parents=True, exist_ok=True)
    (target / testing.CA_IN_CONTAINER.lstrip("/")).touch()  # ch-run binds a file onto a file
    (target / ".xpukit-complete").write_text(image_id + "\n")
    return target


def charliecloud_dir(store: Path, image_id: str) -> Path:
    return store / image_id.removeprefix("sha256:")[:16]


# ---------------------------------------------------------------- preparing a run


@dataclasses.dataclass
class Prepared:
    run: Path
    out_dir: Path
    cells: list[mx.Cell]
    scripts: dict[str, Path]  # cell name -> run.sh


def _pinned_ur(ctx: Context) -> str:
    return mx.ur_releases(mx.pins_mod.load().profile(ctx.profile))[0]


def select_cells(ctx: Context, opts: Options, out_dir: Path) -> list[mx.Cell]:
    if opts.only_failed:
        if ctx.dry_run and not (out_dir / "last").is_file():
            ui.say(f"matrix: no earlier run in {out_dir}: --only-failed would have nothing to rerun")
            return []
        previous = mx.last_run(out_dir)
        cells, _ = mx.read_cells(previous)
        failed = [c for c in cells if not mx.read_outcome(previous, c).passed]
        if not failed:
            ui.say(f"matrix: every cell of the last run ({previous.name}) passed; nothing to rerun")
        else:
            ui.say(f"matrix: rerunning the {len(failed)} failed cell(s) of {previous.name}")
        return failed
    profile = mx.pins_mod.load().profile(ctx.profile)
    matrix = mx.load_matrix(opts.matrix_file or None)
    return mx.expand(matrix, profile, opts.suites, opts.targets, opts.urs, opts.tritons)


NODE_ENGINES = ("docker", "podman")


def check_pulled(opts: Options, tritons: list[str]) -> None:
    """--image for the Slurm nodes (and --node-engine with it): checked before anything is written."""
    if opts.node_engine:
        check_choice("node-engine", opts.node_engine, NODE_ENGINES)
        if not opts.image:
            raise XpukitError("--node-engine needs --image REPOSITORY@sha256:...", "pass the image the nodes pull")
    if not opts.image:
        return
    if opts.scheduler != "slurm" or opts.runtime != "engine":
        raise XpukitError(
            f"--image is for --scheduler slurm (with --runtime engine) or kubernetes, not {opts.scheduler}"
            + ("" if opts.scheduler != "slurm" else f" with --runtime {opts.runtime}"),
            "leave --image out: this machine's engine runs the image it has",
        )
    check_digest(opts.image)
    if len(tritons) > 1:
        raise XpukitError("--image names one image; these cells need one per Triton variant", "pass one --triton")


DIGEST_REF = re.compile(r"^[a-z0-9][a-z0-9.:_/-]*@sha256:[0-9a-f]{64}$")


def check_digest(image: str) -> str:
    """--image as the nodes and pods pull it: REPOSITORY@sha256:<64 hex>, else one error."""
    if not DIGEST_REF.match(image):
        raise XpukitError(f"--image {image} is not pinned by digest", "pass REPOSITORY@sha256:<64 hex>")
    return image


def prepare(ctx: Context, opts: Options, cells: list[mx.Cell], out_dir: Path) -> Prepared:
    """The run folder with one script per cell (a dry run writes them under a temp folder)."""
    tritons = list(dict.fromkeys(c.triton or mx.DEFAULT_TRITON for c in cells))
    check_pulled(opts, tritons)
    images = resolve_images(ctx, tritons)
    # A dry run writes the same scripts under a temp folder, and submits nothing.
    run = mx.new_run_dir(Path(tempfile.mkdtemp(prefix="xpukit-dry-")) if ctx.dry_run else out_dir)
    pinned = _pinned_ur(ctx)
    image_dirs: dict[str, Path] = {}
    store = out_dir / "charliecloud"
    if opts.runtime == "apptainer":
        if not opts.sif:
            raise XpukitError(
                "--runtime apptainer needs --sif FILE",
                "build it: invoke export --format docker-archive --out X.tar, then "
                "apptainer build --fakeroot X.sif docker-archive://X.tar (docs/cluster.md)",
            )
        if opts.scheduler == "local" and not ctx.dry_run and shutil.which("apptainer") is None:
            raise XpukitError("--runtime apptainer: apptainer is not on PATH", "run where Apptainer is installed")
    if opts.runtime == "charliecloud" and not ctx.dry_run:
        image_dirs = {t: charliecloud_image(ctx, tag, i, store) for t, (tag, i) in images.items()}
    cli = ctx.engine.cli_name
    if ctx.engine.kind == "docker" and not ctx.dry_run:
        cli = ctx.engine.build_cli().path
    env = {"DOCKER_HOST": ctx.engine.api} if ctx.engine.kind == "docker" and ctx.engine.api else {}
    pulled = opts.image and opts.runtime == "engine"  # each node pulls the image by digest, its own engine
    if pulled:
        cli, env = opts.node_engine or ctx.engine.cli_name, {}  # the node's engine, found on its PATH
    scripts: dict[str, Path] = {}
    for index, cell in enumerate(cells):
        folder = mx.cell_dir(run, cell)
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o777)  # the image's user writes its results here
        options = cell_options(ctx, folder)
        triton = cell.triton or mx.DEFAULT_TRITON
        prelude = ""
        if opts.runtime == "charliecloud":
            image_dir = image_dirs.get(triton, charliecloud_dir(store, images[triton][1]))
            line = ch_run_line(image_dir, _in_image(cell, containers.WORKSPACE, pinned), options)
            cleanup = ":"
        elif opts.runtime == "apptainer":
            sif = str(Path(opts.sif).expanduser().resolve())
            gpu = ctx.profile == "xpu"
            line = apptainer_line(sif, _in_image(cell, containers.WORKSPACE, pinned), options, gpu)
            cleanup, prelude = ":", f"export {AFFINITY}\n" if gpu else ""
        else:
            name = f"xpukit-matrix-{run.name}-{index}"
            command = _in_image(cell, containers.WORKSPACE, pinned)
            if pulled:
                line = engine_line(cli, opts.image, command, options, name)
                line = registry_line(opts.image, images[triton][1], line)
            else:
                line = engine_line(cli, images[triton][1], command, options, name)
            cleanup = f"{shlex.quote(cli)} rm -f {name} >/dev/null 2>&1"
        script = folder / "run.sh"
        script.write_text(mx.cell_script(cell, folder, line, env, cleanup, prelude))
        script.chmod(0o755)
        scripts[cell.name] = script
    meta: dict[str, Any] = {"profile": ctx.profile, "scheduler": opts.scheduler, "runtime": opts.runtime}
    if pulled:
        meta["pulled"] = {"reference": opts.image, "engine": cli}
    meta["images"] = {t: {"tag": tag, "id": i} for t, (tag, i) in images.items()}
    mx.write_cells(run, cells, meta)
    return Prepared(run, out_dir, cells, scripts)


# ---------------------------------------------------------------- waiting and the table


def _counts(prepared: Prepared, running: set[str] | None = None) -> tuple[int, int, int]:
    done = started = 0
    for cell in prepared.cells:
        folder = mx.cell_dir(prepared.run, cell)
        if (folder / "result.json").exists():
            done += 1
        elif (folder / "started").exists() or (running is not None and cell.name in running):
            started += 1
    return len(prepared.cells) - done - started, started, done


class Progress:
    """`matrix: Q queued, R running, D done` on stderr whenever the counts change."""

    def __init__(self) -> None:
        self.last: tuple[int, int, int] | None = None

    def show(self, counts: tuple[int, int, int]) -> None:
        if counts != self.last:
            self.last = counts
            queued, running, done = counts
            print(f"xpukit: matrix: {queued} queued, {running} running, {done} done", file=sys.stderr, flush=True)


def finish(prepared: Prepared, records: dict[int, mx.SchedulerRecord] | None = None) -> int:
    """The table, from the cells' own files; ``records`` (task index -> what the scheduler says)
    name why a cell has none (Slurm's NODE_FAIL: lost)."""
    records = records or {}
    outcomes = [mx.read_outcome(prepared.run, c, records.get(i)) for i, c in enumerate(prepared.cells)]
    mx.mark_last(prepared.out_dir, prepared.run)
    print(mx.table(outcomes, Path.cwd()), flush=True)
    failed = [o for o in outcomes if not o.passed]
    passed = len(outcomes) - len(failed)
    ui.say(f"matrix: {passed} passed, {len(failed)} failed; run {prepared.run}")
    if failed:
        ui.say("matrix: rerun the failed cells with `invoke matrix --only-failed`")
    return 1 if failed else 0


# ---------------------------------------------------------------- local


def run_local(prepared: Prepared, jobs: int, timeout: float) -> int:
    """The cell scripts as child processes, ``jobs`` at a time."""
    jobs = jobs or os.cpu_count() or 1
    pending = list(prepared.cells)
    running: dict[str, subprocess.Popen] = {}
    progress = Progress()
    deadline = time.monotonic() + timeout if timeout else None
    try:
        while pending or running:
            while pending and len(running) < jobs:
                cell = pending.pop(0)
                running[cell.name] = subprocess.Popen(["bash", str(prepared.scripts[cell.name])])
            for name, proc in list(running.items()):
                if proc.poll() is not None:
                    del running[name]
            progress.show(_counts(prepared, set(running)))
            if deadline and time.monotonic() > deadline:
                raise XpukitError(f"the matrix did not finish within {timeout:.0f} s", "raise --timeout")
            time.sleep(POLL)
    except (KeyboardInterrupt, XpukitError):
        # Ctrl-C or a timeout: every running cell is cancelled (its script removes its container and
        # writes "cancelled"), none is left running; the table still shows where each cell got to.
        for proc in running.values():
            proc.terminate()
        for proc in running.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        finish(prepared)
        raise
    progress.show(_counts(prepared))
    return finish(prepared)


# ---------------------------------------------------------------- slurm


def sbatch_script(prepared: Prepared, throttle: int, extra: list[str]) -> str:
    """One array job: task i runs the script of cell i; its own output goes next to the cells."""
    count = len(prepared.cells)
    array = f"0-{count - 1}" + (f"%{throttle}" if throttle else "")
    lines = [
        "#!/usr/bin/env bash",
        "# xpukit matrix: one Slurm array task per cell (written by `invoke matrix --scheduler slurm`)",
        f"#SBATCH --job-name=xpukit-matrix-{prepared.run.name}",
        f"#SBATCH --array={array}",
        f"#SBATCH --output={prepared.run}/slurm-%a.out",
        "#SBATCH --ntasks=1",
        # A task whose node dies is reported lost (Slurm's NODE_FAIL), not rerun behind the table's
        # back over its first attempt's files: `--only-failed` reruns it, as a new run.
        "#SBATCH --no-requeue",
        *(f"#SBATCH {shlex.quote(arg)}" for arg in extra),
        "cells=(",
        *(f"  {shlex.quote(str(prepared.scripts[c.name]))}" for c in prepared.cells),
        ")",
        'exec bash "${cells[$SLURM_ARRAY_TASK_ID]}"',
    ]
    return "\n".join(lines) + "\n"


def _slurm_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise XpukitError(
            f"--scheduler slurm needs {name}, which is not on PATH",
            "run on a Slurm login node (or apt-get install slurm-client and set SLURM_CONF)",
        )
    return path


# Slurm's final states of a task (its base states): any other state is a task still in the queue.
FINISHED_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "PREEMPTED", "DEADLINE",
                   *mx.LOST_STATES)  # fmt: skip


def slurm_records(squeue: str, job: str) -> dict[int, mx.SchedulerRecord] | None:
    """Array task index -> Slurm's own record of it: ``squeue -r -t all`` (one line per task, pending
    ones too; no accounting storage needed: slurmctld keeps finished tasks for MinJobAge, 300 s by
    default). {} once Slurm has forgotten the job; None when squeue did not answer."""
    cmd = [squeue, "-h", "-r", "-t", "all", "-j", job, "-o", "%K %T %N"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return {} if "Invalid job id" in proc.stderr else None
    records: dict[int, mx.SchedulerRecord] = {}
    for line in proc.stdout.splitlines():
        index, state, node = [*line.split(maxsplit=2), "", ""][:3]
        if index.isdigit() and state:
            records[int(index)] = mx.SchedulerRecord(state, node)
    return records


def run_slurm(prepared: Prepared, opts: Options, dry_run: bool) -> int:
    script = prepared.run / "sbatch.sh"
    script.write_text(sbatch_script(prepared, opts.throttle, inputs.words("sbatch-args", opts.sbatch_args)))
    cmd = ["sbatch", "--parsable", str(script)]
    if dry_run:
        print(f"# {shlex.join(cmd)}")
        print(script.read_text(), end="")
        print_cell_scripts(prepared)
        return 0
    sbatch, squeue = _slurm_tool("sbatch"), _slurm_tool("squeue")
    conf = os.environ.get("SLURM_CONF")
    ui.say("matrix: submitting " + shlex.join([sbatch, *cmd[1:]]) + (f" (SLURM_CONF={conf})" if conf else ""))
    proc = subprocess.run([sbatch, *cmd[1:]], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise XpukitError(f"sbatch failed: {proc.stderr.strip() or proc.stdout.strip()}", "check SLURM_CONF and sinfo")
    job = proc.stdout.strip().split(";")[0]
    (prepared.run / "slurm-job").write_text(job + "\n")
    ui.say(f"matrix: Slurm job {job}, {len(prepared.cells)} array tasks; cancel with `scancel {job}`")
    progress = Progress()
    deadline = time.monotonic() + opts.timeout if opts.timeout else None
    gone_since: float | None = None
    try:
        while True:
            counts = _counts(prepared)
            progress.show(counts)
            if counts[2] == len(prepared.cells):
                break
            records = slurm_records(squeue, job)
            if records is not None and all(r.state in FINISHED_STATES for r in records.values()):
                # Every task is over (or Slurm forgot the job); give the last result files a moment
                # on a shared filesystem.
                gone_since = gone_since or time.monotonic()
                if time.monotonic() - gone_since > 5:
                    break
            if deadline and time.monotonic() > deadline:
                raise XpukitError(
                    f"Slurm job {job} did not finish within {opts.timeout:.0f} s (cancelled)", "raise --timeout"
                )
            time.sleep(POLL)
    except (KeyboardInterrupt, XpukitError):
        subprocess.run([_slurm_tool("scancel"), job], check=False)
        finish(prepared, _records_kept(prepared, job))
        raise
    return finish(prepared, _records_kept(prepared, job))


def _records_kept(prepared: Prepared, job: str) -> dict[int, mx.SchedulerRecord]:
    """Slurm's records of the job's tasks, also written to the run folder (slurm-states.json)."""
    records = slurm_records(_slurm_tool("squeue"), job) or {}
    states = {prepared.cells[i].name: dataclasses.asdict(r) for i, r in records.items() if i < len(prepared.cells)}
    (prepared.run / "slurm-states.json").write_text(json.dumps(states, indent=2, sort_keys=True) + "\n")
    return records


def print_cell_scripts(prepared: Prepared) -> None:
    for cell in prepared.cells:
        print(f"# ---- {prepared.scripts[cell.name]}")
        print(prepared.scripts[cell.name].read_text(), end="")
