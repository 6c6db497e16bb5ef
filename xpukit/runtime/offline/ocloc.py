"""Intel's offline compiler (ocloc): find it, learn its version, turn SPIR-V into zebin.

The kit speaks current ocloc's dialect (Debian forky's ``intel-ocloc`` 26.27 in the cpu image,
Intel's ``intel-ocloc`` in the xpu profile): ``-o FILE``, zebin by default. ocloc 22.x (bookworm's
intel-opencl-icd) rejected ``-o`` and could not target bmg, lnl, ptl, mtl or arl-h; it is refused
with one line.

Which devices an ocloc can target is read from its own ``compile --help`` text (the device list and
the "Deprecated notation that is still supported" line), never from a table of ours: a device list
baked in here would go stale with every ocloc release. A device outside the kit's targets table gets
its Triton properties from ``ocloc query CL_DEVICE_EXTENSIONS -device D``.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import select
import shlex
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

from xpukit.errors import XpukitError
from xpukit.runtime.scratch import KEEP_MARKER, make_scratch_dir, scratch_dir
from xpukit.targets import FAMILIES, PRESETS, TargetPreset, canonical, device_preset

# The pinned triton-xpu 3.3.0b1 (make_spv in triton/backends/intel/compiler.py) retries once with
# this flag whenever IGC's log says "spilled" (any spill), unless the flag is already set; the kit
# follows it (tests/image/test_kernel_lines.py reads the rule off the installed backend). Current
# upstream (#7959, 2026-09) retries only when n_spills > 16: docs/isa.md.
LARGE_GRF_FLAG = "-cl-intel-256-GRF-per-thread"
AUTO_GRF_FLAG = "-cl-intel-enable-auto-large-GRF-mode"
SPILL_MARKER = "spilled"
# The grf_mode values the pinned backend acts on (its XPUOptions.grf_mode default lists them); it does
# not check the option, so any other value compiles at 128 GRF without a word: the kit refuses it.
GRF_MODES = ("small", "large", "auto", "default")
RETRY_RULE = "triton-xpu 3.3.0b1: retry at 256 GRF on any spill"


def check_grf_mode(value: object) -> str:
    """``value`` when it is a grf_mode the pinned Triton knows; else a one-line error naming them."""
    if value not in GRF_MODES:
        raise XpukitError(
            f"grf_mode {value!r} is not one the pinned Triton (3.3.0b1) knows: it would compile at 128 GRF",
            f"use one of {', '.join(GRF_MODES)} (large: 256 GRF per thread)",
        )
    return str(value)


_TIMEOUT_S = 600
ENV_OCLOC = "XPUKIT_OCLOC"  # the ocloc to use instead of the one on PATH
SCRATCH_PREFIX = "xpukit-ocloc-"
MIN_VERSION = (23,)  # the first releases with ``-o`` and zebin by default
_FAMILY_NAMES = ", ".join(f.name for f in FAMILIES)


class OclocError(XpukitError):
    """ocloc is missing, cannot target a device, or failed; carries its log and a repro command."""

    def __init__(self, message: str, fix: str = "", log: str = "", repro: str = "") -> None:
        full = message
        if log.strip():
            full += f"\nocloc log:\n{log.strip()}"
        if repro:
            full += f"\nrepro: {repro}"
        super().__init__(full, fix)
        self.log = log
        self.repro = repro

    def one_line(self) -> str:
        # The CLI prints one line: keep the repro on it, since that is what the user runs next.
        head = super().one_line()
        return f"{head} [repro: {self.repro}]" if self.repro else head


class UnsupportedDeviceError(OclocError):
    """The installed ocloc does not know the requested device."""


class BuildStopped(OclocError):
    """A build in a worker thread was stopped because the run was interrupted (``stop_builds``)."""


# Builds of several targets run in worker threads (compile.build_targets). Ctrl-C reaches the main
# thread only: it calls ``stop_builds``, which kills the ocloc processes still running, so the
# threads return at once and each build's scratch folder is removed.
_STOPPING = threading.Event()
_LIVE: set[subprocess.Popen] = set()
_LIVE_LOCK = threading.Lock()


def _start(
    cmd: list[str], work: Path, stdout: Any = subprocess.PIPE, stderr: Any = subprocess.PIPE
) -> subprocess.Popen:
    # The stop mark is read and the process registered under the lock ``stop_builds`` kills under:
    # a worker that had not yet started its ocloc when Ctrl-C came must not start it afterwards
    # (it would outlive the kill, and the interrupted run would wait for it).
    with _LIVE_LOCK:
        if _STOPPING.is_set():
            raise BuildStopped(f"{cmd[0]} not started: the run was interrupted")
        proc = subprocess.Popen(cmd, cwd=work, stdout=stdout, stderr=stderr, text=True, errors="replace")
        _LIVE.add(proc)
    return proc


def _reap(proc: subprocess.Popen, kill: bool) -> None:
    """Wait for ``proc`` (killed first with ``kill``) and forget it: no zombie, no stray ocloc."""
    try:
        if kill and proc.poll() is None:
            proc.kill()
        proc.wait()
    finally:
        with _LIVE_LOCK:
            _LIVE.discard(proc)


def _run_stoppable(cmd: list[str], work: Path) -> subprocess.CompletedProcess:
    proc = _start(cmd, work)
    with proc:
        try:
            stdout, stderr = proc.communicate(timeout=_TIMEOUT_S)
        except BaseException:
            _reap(proc, kill=True)
            raise
        _reap(proc, kill=False)
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


class _Speculative:
    """The 256-GRF build started beside the default one (``compile_spirv(speculate_large=True)``).
    Its output goes to files, not pipes: nobody reads it until the default build has finished."""

    def __init__(self, cmd: list[str], work: Path) -> None:
        self.cmd = cmd
        self.out, self.err = work / "large.stdout", work / "large.stderr"
        with open(self.out, "w") as out, open(self.err, "w") as err:  # the child keeps its own copies
            self.proc = _start(cmd, work, stdout=out, stderr=err)

    def result(self) -> subprocess.CompletedProcess:
        try:
            _wait_exactly(self.proc, _TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            self.cancel()
            raise OclocError(f"could not run {self.cmd[0]}: {exc}", repro=shlex.join(self.cmd)) from None
        _reap(self.proc, kill=False)
        read = lambda path: path.read_text(errors="replace")  # noqa: E731
        return subprocess.CompletedProcess(self.cmd, self.proc.returncode, read(self.out), read(self.err))

    def cancel(self) -> None:
        _reap(self.proc, kill=True)


def _wait_exactly(proc: subprocess.Popen, timeout: float) -> None:
    """``proc.wait(timeout)``, woken the moment the child exits: Popen's own timed wait polls with
    sleeps of up to 50 ms, lost on every --watch rebuild that waits for the 256-GRF build."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd (an old kernel), or the child is already reaped
        proc.wait(timeout=timeout)
        return
    try:
        if not select.select([fd], [], [], timeout)[0]:
            raise subprocess.TimeoutExpired(proc.args, timeout)
    finally:
        os.close(fd)
    proc.wait()


def stop_builds() -> None:
    """Kill every ocloc build still running in this process (an interrupt in the main thread)."""
    _STOPPING.set()
    with _LIVE_LOCK:
        for proc in list(_LIVE):
            proc.kill()


def builds_may_run() -> None:
    """Clear ``stop_builds``'s mark before new builds start."""
    _STOPPING.clear()


@dataclasses.dataclass(frozen=True)
class CompileResult:
    zebin: bytes
    log: str
    build_flags: str  # the flags of the build that produced ``zebin`` (after a spill retry)
    retried_large_grf: bool
    command: str  # one-line shell command of the final build
    speculation: str = ""  # "used" / "discarded": the fate of a 256-GRF build started beside the default one


@dataclasses.dataclass(frozen=True)
class Ocloc:
    path: str
    version: str  # e.g. "22.43.24595"; "" when ocloc would not say
    named_by: str = ""  # the variable that chose this ocloc (XPUKIT_OCLOC); "" for PATH's or a caller's

    def fix(self, otherwise: str) -> str:
        """The fix of an error about this ocloc: ``otherwise`` (the image, a current intel-ocloc) for the
        ocloc on PATH; for one a variable chose, that variable: the image's ocloc is not the one in use."""
        if not self.named_by:
            return otherwise
        return f"point {self.named_by} at ocloc 26.27 or later, or unset it to use the ocloc on PATH"

    @property
    def version_tuple(self) -> tuple[int, ...]:
        return tuple(int(p) for p in re.findall(r"\d+", self.version)[:3])

    @property
    def devices(self) -> frozenset[str]:
        """Device names this ocloc accepts for ``-device``, as its own help text lists them."""
        return frozenset(parse_device_list(_help_text(self.path)))

    def supports(self, device: str) -> bool:
        return device in self.devices

    def describe(self) -> str:
        return f"ocloc {self.version or '(unknown version)'} at {self.path}"

    def require_current(self) -> None:
        """Refuse ocloc 22.x in one line: its flags and its device list are not the kit's; and a
        program that answers neither ``ocloc query`` nor ``compile --help`` as ocloc does."""
        if not self.version and not self.devices:
            chosen = f"{self.named_by} names {self.path}, which" if self.named_by else self.path
            raise OclocError(
                f"{chosen} does not answer as ocloc (no version, no device list in `compile --help`)",
                self.fix("install Intel's intel-ocloc, or run inside the kit's image (it carries ocloc 26.27)"),
            )
        if self.version_tuple and self.version_tuple < MIN_VERSION:
            raise OclocError(
                f"{self.describe()} is too old: the kit needs ocloc 23 or later (-o, zebin by default, "
                "bmg/lnl/ptl/mtl/arl-h)",
                self.fix("run inside the kit's image (it carries ocloc 26.27), or set XPUKIT_OCLOC to a current ocloc"),
            )

    def extensions(self, device: str) -> frozenset[str]:
        """The OpenCL extensions ocloc reports for ``device`` (``ocloc query CL_DEVICE_EXTENSIONS``)."""
        return _query_extensions(self.path, device)

    def target_preset(self, target: str) -> TargetPreset:
        """The Triton properties for a kit target, an alias, or any other device name this ocloc
        accepts; an error saying what to use instead for anything else."""
        self.require_current()
        name = canonical(target)
        preset = PRESETS.get(name)
        if preset is not None and not preset.ocloc_device:
            raise XpukitError(
                f"target {target!r} is Intel's CPU OpenCL device, which runs SPIR-V and has no zebin",
                f"pick a GPU target ({_FAMILY_NAMES}) for a zebin",
            )
        if preset is None:
            if target not in self.devices:
                raise UnsupportedDeviceError(
                    f"{self.describe()} cannot target {target!r}",
                    f"use a kit target ({_FAMILY_NAMES}) or a device name from `ocloc compile --help`",
                )
            return device_preset(target, self.extensions(target))
        if not self.supports(preset.ocloc_device):
            usable = [n for n, p in PRESETS.items() if p.ocloc_device and self.supports(p.ocloc_device)]
            raise UnsupportedDeviceError(
                f"{self.describe()} cannot target {target!r} (ocloc device {preset.ocloc_device!r})",
                self.fix("use the kit's image (ocloc 26.27)") + (f", or one of: {', '.join(usable)}" if usable else ""),
            )
        return preset

    def require_target(self, target: str) -> str:
        """The ocloc device name for a target (see ``target_preset``)."""
        return self.target_preset(target).ocloc_device

    def command(self, spv: Path, device: str, options: str, out: Path) -> list[str]:
        cmd = [self.path, "compile", "-file", str(spv), "-spirv_input", "-device", device, "-o", str(out)]
        if options.strip():
            cmd += ["-options", options.strip()]
        return cmd

    def compile_spirv(
        self,
        spirv: bytes,
        device: str,
        options: str = "",
        *,
        retry_on_spill: bool = True,
        speculate_large: bool = False,
    ) -> CompileResult:
        """SPIR-V -> zebin for one ocloc device; retries once with 256 GRF on spills, as upstream.

        ``speculate_large``: start the 256-GRF build at once beside the default one (the caller expects
        a spill, e.g. the last build of this kernel spilled) and use it only if the default build's log
        says it spilled; otherwise it is killed. The result is the one the serial retry gives."""
        self.require_current()
        if device not in self.devices:
            raise UnsupportedDeviceError(
                f"{self.describe()} cannot target device {device!r}",
                f"use a kit target ({_FAMILY_NAMES}) or a device name from `ocloc compile --help`",
            )
        # <tmp>/xpukit-ocloc-<pid>-*: removed on success and on interrupt; a later run removes those
        # of killed runs. A failed build keeps its folder (marked) so the repro command has its input.
        work = make_scratch_dir(SCRATCH_PREFIX)
        keep = False
        speculative: _Speculative | None = None
        try:
            spv = work / "kernel.spv"
            spv.write_bytes(spirv)
            flags = options.strip()
            large_flags = f"{flags} {LARGE_GRF_FLAG}".strip()
            may_retry = retry_on_spill and LARGE_GRF_FLAG not in flags
            if may_retry and speculate_large:
                (work / "large").mkdir()
                speculative = _Speculative(
                    self.command(spv, device, large_flags, work / "large" / "kernel.zebin"), work
                )
            retried = False
            log, zebin, cmd = self._run(spv, device, flags, work)
            speculation = "" if speculative is None else "discarded"
            if may_retry and SPILL_MARKER in log:
                flags, retried = large_flags, True
                if speculative is not None:
                    log2, zebin, cmd = self._outcome(speculative.result(), device, work, work / "large")
                    speculation = "used"
                else:
                    log2, zebin, cmd = self._run(spv, device, flags, work)
                log = f"{log}\n--- retry with {LARGE_GRF_FLAG} ---\n{log2}"
        except BuildStopped:
            raise  # nothing to repro: the folder goes
        except OclocError:
            keep = True
            (work / KEEP_MARKER).touch()
            raise
        finally:
            if speculative is not None:
                speculative.cancel()  # unused (no spill) or interrupted: killed and reaped
            if not keep:
                shutil.rmtree(work, ignore_errors=True)
        if zebin.startswith(b"!<arch>\n"):
            # Family and release names (xe2, xe-hpg, gen12lp...) stand for several devices: ocloc
            # builds each and writes an ar archive. The kit's targets are single devices. (Imported
            # here: the host kit imports this module and has no pyelftools.)
            from xpukit.runtime.offline.zebin import read_archive

            members = [m.name for m in read_archive(zebin) if m.kind == "zebin"]
            raise UnsupportedDeviceError(
                f"{device!r} names a group of {len(members)} devices to ocloc (it wrote an archive: "
                f"{', '.join(members[:6])}{', ...' if len(members) > 6 else ''})",
                f"pass single devices as --target (e.g. one of: {_FAMILY_NAMES})",
            )
        return CompileResult(zebin, log, flags, retried, shlex.join(cmd), speculation)

    def _run(self, spv: Path, device: str, flags: str, work: Path) -> tuple[str, bytes, list[str]]:
        out_dir = work / "out"
        shutil.rmtree(out_dir, ignore_errors=True)
        out_dir.mkdir()
        cmd = self.command(spv, device, flags, out_dir / f"{spv.stem}.zebin")
        try:
            proc = _run_stoppable(cmd, work)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise OclocError(f"could not run {self.describe()}: {exc}", repro=shlex.join(cmd)) from None
        return self._outcome(proc, device, work, out_dir)

    def _outcome(
        self, proc: subprocess.CompletedProcess, device: str, work: Path, out_dir: Path
    ) -> tuple[str, bytes, list[str]]:
        cmd = list(proc.args)
        if _STOPPING.is_set():  # the run was interrupted while this build went on in a worker thread
            raise BuildStopped(f"{self.describe()} stopped for device {device}")
        log = (proc.stdout + proc.stderr).strip()
        if proc.returncode != 0:
            raise OclocError(
                f"{self.describe()} failed for device {device} with exit code {proc.returncode}",
                "run the repro command; the SPIR-V input is kept next to it",
                log=log,
                repro=f"cd {shlex.quote(str(work))} && {shlex.join(cmd)}",
            )
        produced = sorted(p for p in out_dir.iterdir() if p.is_file())
        if len(produced) != 1:
            raise OclocError(
                f"{self.describe()} reported success but wrote {len(produced)} files, expected one zebin",
                log=log,
                repro=f"cd {shlex.quote(str(work))} && {shlex.join(cmd)}",
            )
        return log, produced[0].read_bytes(), cmd


def parse_device_list(help_text: str) -> list[str]:
    """Device names from ocloc's ``compile --help``: the "<device_type> can be: a, b, ... or
    hexadecimal" list and the "Deprecated notation that is still supported: <device_type> can be:
    arl, lnl" line (ocloc accepts those names too)."""
    names: list[str] = []
    for match in re.finditer(r"<device_type> can be:(.*?)(?:or hexadecimal|\n\s*\n|\n\s*-)", help_text, re.S):
        for name in (n.strip() for n in match.group(1).replace("\n", " ").split(",")):
            if name and name != "version" and re.fullmatch(r"[\w.\-]+", name) and name not in names:
                names.append(name)
    return names


@functools.cache
def _query_extensions(path: str, device: str) -> frozenset[str]:
    # ``ocloc query`` writes a file named after the query into the cwd: run it in a scratch folder.
    with scratch_dir(SCRATCH_PREFIX) as tmp:
        cmd = [path, "query", "CL_DEVICE_EXTENSIONS", "-device", device]
        try:
            proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, errors="replace", timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise OclocError(f"could not run {shlex.join(cmd)}: {exc}") from None
        written = Path(tmp, "CL_DEVICE_EXTENSIONS")
        if proc.returncode != 0 or not written.is_file():
            raise OclocError(
                f"ocloc at {path} could not list the extensions of device {device!r} (exit {proc.returncode})",
                "use a kit target, or a device this ocloc builds for",
                log=proc.stdout + proc.stderr,
                repro=shlex.join(cmd),
            )
        return frozenset(written.read_text(errors="replace").split())


@functools.cache
def _help_text(path: str) -> str:
    proc = subprocess.run([path, "compile", "--help"], capture_output=True, text=True, errors="replace", timeout=60)
    return proc.stdout + proc.stderr


def _query_version(path: str) -> str:
    # ``ocloc query OCL_DRIVER_VERSION`` writes a file named after the query into the cwd (and newer
    # releases also print it): run it in a scratch directory.
    with scratch_dir(SCRATCH_PREFIX) as tmp:
        try:
            proc = subprocess.run(
                [path, "query", "OCL_DRIVER_VERSION"],
                cwd=tmp,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired):
            return ""
        written = Path(tmp, "OCL_DRIVER_VERSION")
        text = written.read_text(errors="replace") if written.exists() else proc.stdout
    match = re.search(r"\d+\.\d+\.\d+(?:\.\d+)?", text)
    return match.group(0) if match else ""


@functools.cache
def _find(path: str, named_by: str = "") -> Ocloc:
    return Ocloc(path=path, version=_query_version(path), named_by=named_by)


def find_ocloc(explicit: str | None = None) -> Ocloc:
    """The ocloc to use: ``explicit``, else ``$XPUKIT_OCLOC``, else ``ocloc`` on PATH. Errors about an
    ocloc the variable chose name the variable in their fix (:meth:`Ocloc.fix`), not the image."""
    variable = ENV_OCLOC if not explicit and os.environ.get(ENV_OCLOC) else ""
    wanted = explicit or os.environ.get(ENV_OCLOC) or "ocloc"
    path = shutil.which(wanted)
    if path is None:
        raise OclocError(
            f"{variable}={wanted} is not an executable"
            if variable
            else f"ocloc not found ({wanted!r} is not an executable on PATH)",
            Ocloc(wanted, "", variable).fix(
                "run inside the kit's image (it carries ocloc 26.27), or set XPUKIT_OCLOC to a current ocloc"
            ),
        )
    return _find(os.path.realpath(path), variable)
