"""The zebin tasks' bodies: `invoke compile`, `invoke zebin-info` and `invoke kernel-report`.

Each runs `python -m xpukit ...` where Triton and ocloc live: in the image (the default), or on the
host with ``--where host``. kernel-report keeps its reports in the kit's cache (report_cache).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shlex
import shutil
import socket
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from xpukit import layout
from xpukit.errors import UsageError, XpukitError
from xpukit.host import processes, ui
from xpukit.host.commands.boundary import guarded
from xpukit.host.image.plan import ImagePlan
from xpukit.host.run import containers
from xpukit.host.run.in_image import plan_for_run, require_host_runtime, resolve_where, run_in_image
from xpukit.host.settings import Context
from xpukit.runtime.kernels.staging import STAGE_PREFIX
from xpukit.runtime.offline.report_model import Report, ReportOptions, ReportSchemaError


def parse_num_warps(value: str | int | None) -> int | None:
    """--num-warps: a positive power of two, as Triton wants it."""
    if value in (None, ""):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise UsageError(f"--num-warps {value!r} is not a whole number", "pass e.g. --num-warps 4") from None
    if number < 1 or number & (number - 1):
        raise UsageError(f"--num-warps {number} is not a power of two", "pass 1, 2, 4, 8, 16 or 32")
    return number


def check_out_dir(out_dir: str, create: bool) -> tuple[Path, list[Path]]:
    """--out: a folder that exists or can be made, and that this user can write into; with the
    folders made for it, outermost first (a failed run removes them: :func:`remove_made`).

    ``create``: make it now (a real run), so a folder that cannot be made fails before any work."""
    out = Path(out_dir).expanduser().resolve()
    existing = next((p for p in (out, *out.parents) if p.exists()), Path("/"))
    if existing == out and not out.is_dir():
        raise UsageError(f"--out {out_dir} is a file, not a folder", "pass a folder (it is created when missing)")
    if not existing.is_dir():
        raise UsageError(f"--out {out_dir}: {existing} is a file", "pass a folder path")
    fix = "pass a folder you can write to"
    if not os.access(existing, os.W_OK | os.X_OK):
        raise XpukitError(f"--out {out_dir}: {existing} is not writable by you", fix)
    made = [p for p in (out, *out.parents) if not p.exists()][::-1] if create else []
    if create:
        try:
            out.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=out):
                pass
        except OSError as exc:
            raise XpukitError(f"--out {out_dir} cannot be written ({exc.strerror or exc})", fix) from None
    return out, made


def remove_made(folders: Sequence[Path]) -> None:
    """After a failed compile, the --out folders it made (innermost first) that hold nothing but the
    run's own stage (a run killed before it cleaned up); a folder with anything else in it stays."""
    for folder in reversed(folders):
        for stage in folder.glob(f"{STAGE_PREFIX}*"):
            shutil.rmtree(stage, ignore_errors=True)
        with contextlib.suppress(OSError):
            folder.rmdir()


def _run_on_host(ctx: Context, module_args: list[str]) -> int:
    """`python -m xpukit ...` with this interpreter: the same command the image runs."""
    cmd = [sys.executable, "-m", "xpukit", *module_args]
    if ctx.dry_run:
        print(shlex.join(cmd))
        return 0
    return processes.stream_process(cmd, {"PYTHONPATH": str(layout.REPO_ROOT)})


def _kernel_file(kernel: str) -> tuple[Path, str]:
    path, sep, function = kernel.rpartition(":")
    if not sep or not Path(path).is_file() or not function:
        raise UsageError(
            f"kernel {kernel!r} is not path.py:function of an existing file",
            "e.g. invoke compile examples/kernels.py:scale_kernel",
        )
    return Path(path), function


def _make_cache_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise XpukitError(
            f"the kit's cache folder {folder} cannot be made ({exc.strerror or exc})",
            "set XPUKIT_CACHE_DIR to a folder you can write to",
        ) from None


def kit_cache_root() -> Path:
    """Where compile and kernel-report keep Triton's cache and the stored reports: the checkout's
    .xpukit/, or $XPUKIT_CACHE_DIR."""
    from xpukit.host.run import report_cache

    return layout.kit_cache_dir(default=report_cache.cache_root(layout.REPO_ROOT)).resolve()


@dataclasses.dataclass(frozen=True)
class KitSide:
    """Where a `python -m xpukit` command runs: the host (this interpreter) or the image."""

    on_host: bool
    why: str

    def path(self, path: Path | str) -> str:
        """A host path as the command sees it (under /workspace in the image when in the checkout)."""
        return str(Path(path).resolve()) if self.on_host else containers.container_path(path)


def _kit_side(ctx: Context, where: str) -> KitSide:
    where, why = resolve_where(where, ctx)
    if where == "host":
        require_host_runtime()
    return KitSide(where == "host", why)


def _run_kit(
    ctx: Context,
    side: KitSide,
    args: list[str],
    reads: Sequence[Path] = (),
    writes: Sequence[Path] = (),
    what: str = "",
    host_network: bool = False,
    env: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    plan: ImagePlan | None = None,
) -> int:
    """The one path of compile, zebin-info and kernel-report: `python -m xpukit ARGS` on the host,
    or in the image as the calling user (files it writes are theirs) with the host paths it reads
    mounted read-only (the checkout already is), those it writes read-write, and Triton's cache
    kept in the kit's cache folder (not the image user's cache volume, which the caller cannot
    write). A dry run prints the command instead. ``env``: more variables for the command;
    ``labels``: the container's; ``plan``: the task's image plan, when it made one already."""
    from xpukit.host.run import report_cache

    args = (["--debug"] if ctx.debug else []) + args
    if side.on_host and env:
        cmd = [sys.executable, "-m", "xpukit", *args]
        if ctx.dry_run:
            print(processes.printable(cmd, env))
            return 0
        return processes.stream_process(cmd, {"PYTHONPATH": str(layout.REPO_ROOT), **env})
    if side.on_host:
        return _run_on_host(ctx, args)
    mounts = {}
    for path in reads:
        if not containers.container_path(path).startswith(containers.WORKSPACE):
            mounts[str(Path(path).resolve())] = "ro"
    for path in writes:
        mounts[str(Path(path).resolve())] = "rw"
    triton_cache = kit_cache_root() / report_cache.TRITON_CACHE
    if not ctx.dry_run:
        _make_cache_folder(triton_cache)
    mounts[str(triton_cache)] = "rw"
    options = containers.container_options(ctx, mounts=mounts, as_caller=True)
    options["volumes"].pop(ctx.settings.cache_volume, None)
    options["environment"]["TRITON_CACHE_DIR"] = str(triton_cache)
    options["environment"].update(env or {})
    if labels:
        options["labels"] = labels
    if host_network:  # a server on the host's 127.0.0.1 (kernel-report --watch)
        options["network_mode"] = "host"
    if what:
        ui.say(f"{what} in the image ({side.why})")
    return run_in_image(ctx, ["python", "-m", "xpukit", *args], options, plan=plan)


@guarded
def compile_kernel(
    ctx: Context,
    where: str,
    kernel: str,
    targets: list[str],
    out_dir: str,
    signature: str | None,
    constexprs: list[str],
    num_warps: str | int | None,
    asm: bool = False,
) -> int:
    warps = parse_num_warps(num_warps)
    path, function = _kernel_file(kernel)
    out, made = check_out_dir(out_dir, create=not ctx.dry_run)
    code = 1
    try:  # the image writes all targets' files or none (staging.staged_output); the folders made here go too
        side = _kit_side(ctx, where)
        args = ["compile", f"{side.path(path)}:{function}", "--target", ",".join(targets), "--out", str(out)]
        if signature:
            args += ["--signature", signature]
        for item in constexprs:
            args += ["--constexpr", item]
        if warps:
            args += ["--num-warps", str(warps)]
        if asm:
            args.append("--asm")
        code = _run_kit(ctx, side, args, reads=[path.resolve().parent], writes=[out], what="compiling")
    finally:
        if code:
            remove_made(made)
    return code


@guarded
def zebin_info(ctx: Context, where: str, path: str, as_json: bool = False, asm: bool = False) -> int:
    if not Path(path).is_file():  # /dev/zero, a pipe or a folder would be read in the image without end
        what = " is not a regular file" if path and Path(path).exists() else ": no such file"
        raise UsageError(f"{path or 'FILE'}{what}", "pass the path of a .zebin file")
    file = Path(path).resolve()
    side = _kit_side(ctx, where)
    args = ["zebin-info", side.path(file), *(["--json"] if as_json else []), *(["--asm"] if asm else [])]
    return _run_kit(ctx, side, args, reads=[file.parent])


@guarded
def kernel_report(
    ctx: Context,
    where: str,
    kernel: str,
    targets: list[str],
    configs: list[str],
    output_format: str = "md",
    signature: str | None = None,
    constexprs: list[str] | None = None,
    diff: bool = False,
    no_cache: bool = False,
    lines: bool = False,
    watch: bool = False,
    launched_by: str | None = None,
    script_args: str = "",
    baseline_config: str | None = None,
    baseline_target: str | None = None,
) -> int:
    """Compile KERNEL for every target x config where Triton and ocloc live; one table on stdout.
    An unchanged kernel at unchanged options, image and kit code prints its stored report.
    ``lines``: per source line too; ``watch``: serve the per-line view, recompiled on each save;
    ``launched_by``: a script whose launches (run once in the image) are the configs; never stored."""
    if launched_by is not None and watch:
        raise UsageError("--launched-by and --watch both given", "drop one: the watch compiles the declared configs")
    against = {"baseline_config": baseline_config or None, "baseline_target": baseline_target or None}
    if watch:
        if output_format != "md":  # the watch serves its own page: a format would be dropped without a word
            raise UsageError(
                f"--watch serves the per-line page on 127.0.0.1 and prints no report; --format {output_format} "
                "has nothing to format",
                f"drop --format {output_format}, or drop --watch to print the report once",
            )
        return _watch_report(ctx, where, kernel, targets, configs, signature, constexprs, against)
    # JSON on stdout is data: progress and any build log go to stderr.
    with ui.progress_on_stderr(output_format in ("json", "html")):
        return _kernel_report(
            ctx, where, kernel, targets, configs, output_format, signature, constexprs, diff, no_cache, lines,
            launched_by, script_args, against,
        )  # fmt: skip


def _report_options(
    side: KitSide, path: Path, function: str, targets: list[str], configs: list[str],
    signature: str | None, constexprs: list[str] | None, lines: bool = False,
    against: dict[str, str | None] | None = None,
) -> ReportOptions:  # fmt: skip
    """What the report is asked for, with the kernel's path as the side that compiles it sees it."""
    return ReportOptions(
        f"{side.path(path)}:{function}",
        targets=(",".join(targets),),
        configs=tuple(configs),
        signature=signature or None,
        constexprs=tuple(constexprs or ()),
        lines=lines,
        **(against or {}),
    )


def free_port() -> int:
    """A port nothing listens on at 127.0.0.1 now (the watch server takes it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _watch_report(
    ctx: Context, where: str, kernel: str, targets: list[str], configs: list[str],
    signature: str | None, constexprs: list[str] | None, against: dict[str, str | None] | None = None,
) -> int:  # fmt: skip
    path, function = _kernel_file(kernel)
    side = _kit_side(ctx, where)
    args = _report_options(side, path, function, targets, configs, signature, constexprs, against=against).argv()
    args += ["--watch", "--port", str(free_port())]
    what = "watching the kernel (Ctrl-C stops)"
    if not side.on_host and not ctx.dry_run:
        left = containers.sweep_watch_containers(ctx.engine.client())
        if left:
            ui.say(f"removed {len(left)} watch container(s) whose invoke was killed: {', '.join(left)}")
    # SIGTERM and SIGHUP take Ctrl-C's path (the container is removed); a SIGKILL closes the
    # lifeline, and the watch stops itself; the label lets the next watch remove what is left.
    with containers.lifeline() as env, containers.signals_stop_like_ctrl_c():
        return _run_kit(
            ctx, side, args, reads=[path.resolve().parent], what=what, host_network=True, env=env,
            labels=containers.watch_labels(),
        )  # fmt: skip


def _kernel_report(
    ctx: Context,
    where: str,
    kernel: str,
    targets: list[str],
    configs: list[str],
    output_format: str,
    signature: str | None,
    constexprs: list[str] | None,
    diff: bool,
    no_cache: bool,
    lines: bool = False,
    launched_by: str | None = None,
    script_args: str = "",
    against: dict[str, str | None] | None = None,
) -> int:
    from xpukit.host.run import report_cache
    from xpukit.runtime.offline import report_format

    if output_format not in ("md", "json", "html"):
        raise UsageError(f"unknown format {output_format!r}", "use --format md, json or html")
    path, function = _kernel_file(kernel)
    side = _kit_side(ctx, where)
    options = _report_options(side, path, function, targets, configs, signature, constexprs, lines, against)
    reads = [path.resolve().parent]
    as_given: list[str] = []  # the script's path as the user gave it: the image sees it under /workspace
    if launched_by is not None:
        script = Path(launched_by).expanduser()
        if not script.is_file():
            raise UsageError(f"--launched-by {launched_by}: no such file", "give the script that launches the kernel")
        options = dataclasses.replace(options, launched_by=side.path(script), script_args=script_args or None)
        reads.append(script.resolve().parent)
        no_cache = True  # what a script launches is not in the cache key: always run it
        as_given = ["--launched-by-as", launched_by]
    args = options.argv() + as_given
    cache = report_cache.ReportCache(kit_cache_root())
    # The task's one image plan (the image built when missing): the cache key and the run share it.
    plan = None if side.on_host else plan_for_run(ctx)
    if ctx.dry_run:
        save = cache.folder / ".KEY.json"  # the cache folder is mounted at its own path, like --out
        args += ["--format", "none", "--save", str(save)]
        return _run_kit(ctx, side, args, reads=reads, writes=[cache.folder], plan=plan)
    toolchain = _toolchain(ctx, side, plan)
    key = report_cache.report_key(path, function, options.key_fields(), toolchain, layout.REPO_ROOT)
    cache.sweep()
    previous = cache.previous(key) if diff else None
    data_out = output_format in ("json", "html")  # stdout is the document: the diff goes to stderr
    formatter: dict[str, Callable[[Report], str]] = {
        "json": lambda r: json.dumps(r.to_dict(), indent=2),
        "html": report_format.format_html,
    }
    render = formatter.get(output_format, report_format.format_markdown)
    # The report names files as the run saw them; the user reads (and opens) them as they gave them.
    given = {str(path.resolve()): str(path)}

    def shown(report: Report) -> tuple[str, bool]:
        report_cache.rewrite_paths(report, lambda p: given.get(p, p))
        changed = mark_source_changed(report, path)
        return render(report), changed

    text, changed, report = "", False, None
    if not no_cache:
        report, damage = cache.lookup(key.key)
        if damage:
            ui.warn(f"the stored report {cache.path(key.key)} is damaged ({damage}); compiling it again")
    if report is not None:
        text, changed = shown(report)  # every field was checked against the records as it was read
        ui.say(f"kernel-report: unchanged kernel, options and toolchain: the report of {report.stored_at}")
        cache.remember(key)
    if report is None:
        _make_cache_folder(cache.folder)
        # The run's report comes back through the cache folder; one that cannot be written (a
        # read-only disk) takes a private folder instead: the report is shown, and store() says
        # in one note that it is not kept.
        save = cache.run_file(key.key)
        scratch = None if _can_make(save) else Path(tempfile.mkdtemp(prefix="xpukit-report-"))
        if scratch is not None:
            save = scratch / save.name
        args += ["--format", "none", "--save", str(save)]  # mounted at its own path, like --out
        try:
            what = "compiling every target x config"
            with _stdout_to_stderr(data_out):  # the run's lines, its error too, are not the document
                code = _run_kit(ctx, side, args, reads=reads, writes=[save.parent], what=what, plan=plan)
            if not save.is_file():
                return code or 1  # the command failed before any report: its error is on stderr
            try:
                fresh = Report.from_dict(json.loads(save.read_bytes()))
            except (OSError, ValueError, ReportSchemaError) as exc:
                raise XpukitError(
                    f"the report the run wrote ({save}) cannot be read ({exc})", "run the command again"
                ) from None
        finally:
            with contextlib.suppress(OSError):
                save.unlink(missing_ok=True)
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
        if not side.on_host:  # stored with the host's paths: /workspace means nothing outside the image
            report_cache.rewrite_paths(
                fresh, lambda p: report_cache.host_path(p, layout.REPO_ROOT, containers.WORKSPACE)
            )
        # A file saved during the compile, or a script's launches: shown, never stored as the report of
        # this key (the next run would serve text that was never compiled, or launches not rerun).
        report = fresh if fresh.source_changed or launched_by is not None else cache.store(key, fresh)
        text, changed = shown(report)
    for note in cache.notes:
        ui.warn(note)
    if changed:
        ui.warn(f"{path}: source changed since compile; run again for the file as it is now")
    print(text)
    if diff:
        print("", file=sys.stderr if data_out else sys.stdout)
        text = report_format.format_diff(previous, report) if previous else "No previous report of this kernel."
        print(text, file=sys.stderr if data_out else sys.stdout)
    return 1 if report.failed else 0


def _can_make(path: Path) -> bool:
    """Whether a file can be made at ``path`` (made and removed again: a read-only disk, a folder
    of another user's or an immutable one each say no)."""
    try:
        path.touch(exist_ok=False)
    except OSError:
        return False
    path.unlink(missing_ok=True)
    return True


def mark_source_changed(report: Report, path: Path) -> bool:
    """True (and the report marked) when the kernel's file is not the one the report compiled
    (saved during the compile): the report's lines then show the source it compiled, never the file now."""
    compiled = report.kernel_source.sha256 if report.kernel_source else ""
    changed = bool(compiled) and compiled != hashlib.sha256(path.read_bytes()).hexdigest()
    if changed:
        report.source_changed = True
    return changed


@contextlib.contextmanager
def _stdout_to_stderr(enabled: bool) -> Iterator[None]:
    """While the report's run runs, its stdout goes to stderr, this process's and its children's
    (fd 1: `--where host` runs a process): with --format json|html stdout is the document alone,
    never a progress line or an error of the run."""
    if not enabled:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _toolchain(ctx: Context, side: KitSide, plan: ImagePlan | None) -> str:
    """What compiled the report, for its cache key: the plan's image's ID, or the host's install."""
    from xpukit.host.run import report_cache

    if side.on_host or plan is None:
        return report_cache.host_toolchain()
    image = ctx.engine.client().images.get(plan.tag)
    labels = image.labels or {}
    compiler = " ".join(labels.get(f"io.xpukit.pins.{name}", "") for name in ("ocloc", "ocloc-debs"))
    return f"image {plan.tag} {image.id} compiler {compiler}"
