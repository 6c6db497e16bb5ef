"""Intel's offline compiler (ocloc): find it, learn its version and flag dialect, turn SPIR-V into zebin.

Two dialects matter:

* ocloc 22.x (Debian bookworm's intel-opencl-icd) rejects ``-o``; it wants ``-output NAME -out_dir DIR
  -output_no_suffix`` and writes the old "patchtokens" format unless given ``--format zebin``.
* Current ocloc (Intel's ``intel-ocloc``) takes ``-o FILE``, writes zebin by default and may append
  ``.bin`` to the name it was given.

Which devices an ocloc can target is read from its own ``compile --help`` text, never from a table of
ours: a device list baked in here would go stale with every ocloc release.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from xpukit.errors import XpukitError
from xpukit.runtime.scratch import KEEP_MARKER, make_scratch_dir, scratch_dir
from xpukit.targets import GPU_PRESETS, PRESETS, canonical

# Upstream (make_spv in triton-xpu 3.3, make_zebin at 9e23713) retries once with this flag when
# IGC's log says the kernel spilled registers.
LARGE_GRF_FLAG = "-cl-intel-256-GRF-per-thread"
_TIMEOUT_S = 600
SCRATCH_PREFIX = "xpukit-ocloc-"


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


@dataclasses.dataclass(frozen=True)
class CompileResult:
    zebin: bytes
    log: str
    build_flags: str  # the flags of the build that produced ``zebin`` (after a spill retry)
    retried_large_grf: bool
    command: str  # one-line shell command of the final build


@dataclasses.dataclass(frozen=True)
class Ocloc:
    path: str
    version: str  # e.g. "22.43.24595"; "" when ocloc would not say

    @property
    def version_tuple(self) -> tuple[int, ...]:
        return tuple(int(p) for p in re.findall(r"\d+", self.version)[:3])

    @property
    def legacy_flags(self) -> bool:
        """True for the 22.x dialect (-output/-out_dir/-output_no_suffix, --format zebin)."""
        if self.version_tuple:
            return self.version_tuple < (23,)
        # Unknown version: trust the help text; the 22.x help has no ``-o`` entry.
        return not re.search(r"^\s*-o\s", _help_text(self.path), re.MULTILINE)

    @property
    def devices(self) -> frozenset[str]:
        """Device names this ocloc accepts for ``-device``, as its own help text lists them."""
        return frozenset(parse_device_list(_help_text(self.path)))

    def supports(self, device: str) -> bool:
        return device in self.devices

    def describe(self) -> str:
        return f"ocloc {self.version or '(unknown version)'} at {self.path}"

    def require_target(self, target: str) -> str:
        """The ocloc device name for an xpukit target, or an error saying what to use instead."""
        preset = PRESETS.get(canonical(target))
        if preset is None:
            raise XpukitError(f"unknown target {target!r}", f"use one of: {', '.join(GPU_PRESETS)}")
        if not preset.ocloc_device:
            raise XpukitError(
                f"target {target!r} is Intel's CPU OpenCL device, which runs SPIR-V and has no zebin",
                "pick a GPU target (pvc, acm-g10, bmg, lnl, mtl) for a zebin",
            )
        if not self.supports(preset.ocloc_device):
            usable = [n for n, p in PRESETS.items() if p.ocloc_device and self.supports(p.ocloc_device)]
            raise UnsupportedDeviceError(
                f"{self.describe()} cannot target {target!r} (ocloc device {preset.ocloc_device!r})",
                "install Intel's current intel-ocloc (the xpu profile has it)"
                + (f", or use one of: {', '.join(usable)}" if usable else ""),
            )
        return preset.ocloc_device

    def command(self, spv: Path, device: str, options: str, out_dir: Path) -> list[str]:
        cmd = [self.path, "compile", "-file", str(spv), "-spirv_input", "-device", device]
        if self.legacy_flags:
            cmd += ["-output", spv.stem, "-out_dir", str(out_dir), "-output_no_suffix", "--format", "zebin"]
        else:
            cmd += ["-o", str(out_dir / f"{spv.stem}.zebin")]
        if options.strip():
            cmd += ["-options", options.strip()]
        return cmd

    def compile_spirv(
        self, spirv: bytes, device: str, options: str = "", *, retry_on_spill: bool = True
    ) -> CompileResult:
        """SPIR-V -> zebin for one ocloc device; retries once with 256 GRF on spills, as upstream."""
        if device not in self.devices:
            raise UnsupportedDeviceError(
                f"{self.describe()} cannot target device {device!r}",
                "install Intel's current intel-ocloc (the xpu profile has it)",
            )
        # <tmp>/xpukit-ocloc-<pid>-*: removed on success and on interrupt; a later run removes those
        # of killed runs. A failed build keeps its folder (marked) so the repro command has its input.
        work = make_scratch_dir(SCRATCH_PREFIX)
        keep = False
        try:
            spv = work / "kernel.spv"
            spv.write_bytes(spirv)
            flags = options.strip()
            retried = False
            log, zebin, cmd = self._run(spv, device, flags, work)
            if retry_on_spill and "spilled" in log and LARGE_GRF_FLAG not in flags:
                flags = f"{flags} {LARGE_GRF_FLAG}".strip()
                retried = True
                log2, zebin, cmd = self._run(spv, device, flags, work)
                log = f"{log}\n--- retry with {LARGE_GRF_FLAG} ---\n{log2}"
        except OclocError:
            keep = True
            (work / KEEP_MARKER).touch()
            raise
        finally:
            if not keep:
                shutil.rmtree(work, ignore_errors=True)
        return CompileResult(zebin, log, flags, retried, shlex.join(cmd))

    def _run(self, spv: Path, device: str, flags: str, work: Path) -> tuple[str, bytes, list[str]]:
        out_dir = work / "out"
        shutil.rmtree(out_dir, ignore_errors=True)
        out_dir.mkdir()
        cmd = self.command(spv, device, flags, out_dir)
        try:
            proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, errors="replace", timeout=_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise OclocError(f"could not run {self.describe()}: {exc}", repro=shlex.join(cmd)) from None
        log = (proc.stdout + proc.stderr).strip()
        if proc.returncode != 0:
            raise OclocError(
                f"{self.describe()} failed for device {device} with exit code {proc.returncode}",
                "run the repro command; the SPIR-V input is kept next to it",
                log=log,
                repro=f"cd {shlex.quote(str(work))} && {shlex.join(cmd)}",
            )
        produced = sorted(p for p in out_dir.iterdir() if p.is_file())
        # Current ocloc may append ".bin"; 22.x with -output_no_suffix writes the bare stem.
        if len(produced) != 1:
            raise OclocError(
                f"{self.describe()} reported success but wrote {len(produced)} files, expected one zebin",
                log=log,
                repro=f"cd {shlex.quote(str(work))} && {shlex.join(cmd)}",
            )
        return log, produced[0].read_bytes(), cmd


def parse_device_list(help_text: str) -> list[str]:
    """Device names from ocloc's ``compile --help`` ("<device_type> can be: a, b, ... or hexadecimal")."""
    match = re.search(r"<device_type> can be:(.*?)(?:or hexadecimal|\n\s*\n|\n\s*-)", help_text, re.S)
    if not match:
        return []
    names = (n.strip() for n in match.group(1).replace("\n", " ").split(","))
    return [n for n in names if n and n != "version" and re.fullmatch(r"[\w.\-]+", n)]


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
def _find(path: str) -> Ocloc:
    return Ocloc(path=path, version=_query_version(path))


def find_ocloc(explicit: str | None = None) -> Ocloc:
    """The ocloc to use: ``explicit``, else ``$XPUKIT_OCLOC``, else ``ocloc`` on PATH."""
    wanted = explicit or os.environ.get("XPUKIT_OCLOC") or "ocloc"
    path = shutil.which(wanted)
    if path is None:
        raise OclocError(
            f"ocloc not found ({wanted!r} is not an executable on PATH)",
            "run inside the kit's image (it installs ocloc), or apt-get install intel-opencl-icd, "
            "or set XPUKIT_OCLOC to its path",
        )
    return _find(os.path.realpath(path))
