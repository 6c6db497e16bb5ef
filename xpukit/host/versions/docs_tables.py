"""The version and compatibility tables of README.md and docs/**/*.md, generated from env/pins.toml.

A table lives between ``<!-- generated:NAME -->`` and ``<!-- end -->``; everything between the two
markers belongs to this module. ``invoke docs`` (or ``python -m xpukit.host.versions.docs_tables``) rewrites
the regions; ``--check`` only reports the ones that differ (tests/host/test_docs.py runs it).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from xpukit import layout
from xpukit.errors import XpukitError
from xpukit.host.versions import pins as pins_mod
from xpukit.targets import CALCULATOR_URL, FAMILIES, MAX_WORK_GROUP_SIZE, UNKNOWN, Family

# A marker counts only on a line of its own, so prose can mention one in backticks.
REGION_RE = re.compile(r"^(<!-- generated:([a-z0-9-]+) -->\n)(.*?)^(<!-- end -->)$", re.DOTALL | re.MULTILINE)
BEGIN_RE = re.compile(r"^<!-- generated:(\S*) -->$", re.MULTILINE)


def doc_files(root: Path = layout.REPO_ROOT) -> list[Path]:
    """The files that may hold generated regions: README.md and every doc under docs/ (docs/benchmarks/ too)."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def _code(text: str) -> str:
    return f"`{text}`"


def _table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _base(profile: pins_mod.Profile) -> str:
    digest = profile.base.digest
    return _code(profile.base_name) + (f" @ {_code(digest[:19])}..." if digest else " (not pinned by digest)")


def _ocloc(profile: pins_mod.Profile) -> str:
    ocloc = profile["ocloc"]
    if ocloc["source"] == "debian-folder":
        igc = ocloc["debs"].get("libigc2", {}).get("version", "")
        with_igc = f", IGC {_code('libigc2')} {igc}" if igc else ""
        return (
            f"{_code(ocloc['package'])} {ocloc['version']}{with_igc} "
            f"(Debian {ocloc['suite']}, unpacked into a self-contained folder)"
        )
    where = {"apt": "Debian archive", "intel-gpu-repo": "Intel's GPU package repository"}[ocloc["source"]]
    return f"{_code(ocloc['package'])} {ocloc['version'] or 'unpinned'} ({where})"


def _triton(profile: pins_mod.Profile, commit: str = "", llvm_pin: str = "") -> str:
    triton = profile["triton"]
    if triton["source"] == "pypi":
        return f"{_code(triton['package'])} {triton['version']} (PyPI)"
    llvm = {"prebuilt": "LLVM: Triton's prebuilt download", "source": "LLVM from source", "": ""}[triton["llvm"]]
    if llvm:
        llvm += f" of {_code(llvm_pin)}" if llvm_pin else ", the hash read from the checkout at build time"
    return f"{'git ' + _code(commit or triton['commit']) if commit != '-' else 'git'}" + (f"; {llvm}" if llvm else "")


def _torch(profile: pins_mod.Profile, commit: str = "") -> str:
    torch = profile["torch"]
    if torch["source"] == "none":
        return "none"
    if torch["source"] == "wheel":
        return f"XPU wheel {torch['wheel_version']}"
    return f"built from source at {_code(commit or torch['commit'])}"


def _ur(profile: pins_mod.Profile) -> str:
    ur = profile["ur"]
    if ur["source"] == "oneapi":
        return "the base image's oneAPI"
    return f"{ur['version']} (PyPI: {', '.join(ur['packages'])})"


_READ_TORCH = "source: the commit's `.github/pins/pytorch.txt`, read at build time"


def profiles_table(pins: pins_mod.Pins) -> str:
    """One row per profile and Triton variant."""
    rows = []
    for name, profile in pins.profiles.items():
        python = profile["python"] or "the base image's"
        variants = profile["triton"].get("variants", {})
        default = [v for v, commit in variants.items() if commit == profile["triton"]["commit"]]
        label = _code(name) + (f" (default: `--triton {default[0]}`)" if default else "")
        llvm_pins = profile["triton"].get("llvm_pins", {})
        default_llvm = llvm_pins.get(default[0], "") if default else ""
        rows.append(
            [
                label,
                _base(profile),
                python,
                _ocloc(profile),
                _triton(profile, "", default_llvm),
                _torch(profile),
                _ur(profile),
            ]
        )
        torch_variants = profile["torch"].get("variants", {})
        for variant, commit in variants.items():
            if variant in default:
                continue
            torch_commit = torch_variants.get(variant, "")
            rows.append(
                [
                    f"{_code(name)} `--triton {variant}`",
                    "same",
                    "same",
                    "same",
                    _triton(profile, commit, llvm_pins.get(variant, "")),
                    _torch(profile, torch_commit) if torch_commit else _READ_TORCH,
                    "same",
                ]
            )
        if profile["triton"]["source"] == "git":
            # Any other commit: its own pins, read from its checkout when the image is built.
            rows.append(
                [
                    f"{_code(name)} `--triton <40-hex commit>`",
                    "same",
                    "same",
                    "same",
                    _triton(profile, "-"),
                    _READ_TORCH,
                    "same",
                ]
            )
    return _table(["profile", "base image", "Python", "ocloc", "Triton", "PyTorch", "Unified Runtime"], rows)


def ur_matrix_table(pins: pins_mod.Pins) -> str:
    """The UR releases the binding tests run against (cpu.ur.matrix)."""
    rows = []
    for name, profile in pins.profiles.items():
        ur = profile["ur"]
        for version in ur.get("matrix", []):
            line = ".".join(version.split(".")[:2])
            image = "yes" if version == ur["version"] else ""
            rows.append([line, version, _code(name), image])
    return _table(["UR release", "wheel version tested", "profile", "in the image"], rows)


def packages_table(pins: pins_mod.Pins) -> str:
    """Every exactly pinned package, per profile and kind."""
    rows = []
    for name, profile in pins.profiles.items():
        for kind, label in (("apt", "apt"), ("build_apt", "apt, build stages only"), ("pypi", "PyPI")):
            for package, version in profile[kind].items():
                rows.append([_code(name), label, _code(package), version or "unpinned"])
    for package, version in pins.data.get("host", {}).items():
        rows.append(["host", "PyPI (env/lock/host.txt)", _code(package), version])
    return _table(["profile", "from", "package", "version"], rows)


def targets_table(_pins: pins_mod.Pins) -> str:
    """The targets table (xpukit/targets.py): `invoke compile --target` names and what each family has."""
    rows = []
    for f in FAMILIES:
        caps = f.occupancy
        rows.append(
            [
                _code(f.name),
                ", ".join(_code(a) for a in f.aliases) or "-",
                _code(f.ocloc_device),
                f.generation,
                str(f.product_family),
                f"0x{f.architecture:010X}" if f.architecture is not None else UNKNOWN,
                _code(f.iga_platform),
                _triton_from(f),
                ", ".join(str(s) for s in f.triton.sub_group_sizes),
                "yes" if f.triton.dpas else "no",
                "yes" if f.triton.block_io_2d else "no",
                "yes" if f.triton.fp64 else "no",
                f"{caps.slm_per_work_group // 1024} KiB" if caps else UNKNOWN,
                "/".join(map(str, f.limits.grf_counts)) if f.limits else "not checked",
            ]
        )
    header = ["--target", "aliases", "ocloc -device", "generation", "product family", "SYCL architecture",
              "IGA platform", "Triton 3.3 properties", "SIMD widths", "DPAS", "2D block IO", "fp64", "SLM/WG",
              "GRF"]  # fmt: skip
    return _table(header, rows)


def _triton_from(f: Family) -> str:
    return f"{_code(f.triton_from)}'s (nearest known)" if f.triton_from else "its own (ocloc query)"


# What the status table says, per stage (tests/image/test_families.py compiles examples/' kernels for
# every family; the CPU device runs the `cpu` target's SPIR-V in tests/image/test_launch_kernels.py).
COMPILES = "yes: examples/' kernels, `tests/image/test_families.py`"
NOT_ON_CPU = "n/a: a zebin runs on its GPU only"
NO_GPU = "not run: no Intel GPU on this machine (`tests/gpu/` skip)"


def families_table(_pins: pins_mod.Pins) -> str:
    """Per family, what has been done with it here, stage by stage (ROCm TheRock's support matrix)."""
    rows = [[_code(f.name), f.generation, _code(f.iga_platform), _triton_from(f), COMPILES, NOT_ON_CPU,
             f.ran_on_gpu or NO_GPU] for f in FAMILIES]  # fmt: skip
    rows.append(["`cpu`", "Intel CPU (OpenCL)", "-", "the `cpu` preset: no DPAS, no 2D block IO",
                 "n/a: SPIR-V only", "yes: `tests/image/test_launch_kernels.py`, `invoke demo-ur`", "n/a"])  # fmt: skip
    header = ["target", "generation", "IGA platform", "Triton 3.3 properties", "compiles a zebin (ocloc 26.27)",
              "ran on the CPU device", "ran on that GPU"]  # fmt: skip
    return _table(header, rows)


def _steps(kb: tuple[int, ...]) -> str:
    """SLM steps with a run of four or more consecutive sizes written as a range: 0-16, 24, 32."""
    runs: list[list[int]] = []
    for step in kb:
        if runs and runs[-1][-1] == step - 1:
            runs[-1].append(step)
        else:
            runs.append([step])
    parts = [[f"{r[0]}-{r[-1]}"] if len(r) >= 4 else [str(x) for x in r] for r in runs]
    return ", ".join(p for part in parts for p in part)


def occupancy_table(_pins: pins_mod.Pins) -> str:
    """The occupancy figures per family (xpukit/targets.py ``OccupancyLimits``) and where the
    Occupancy Calculator has it."""
    rows = []
    for f in FAMILIES:
        o = f.occupancy
        if o is None:
            rows.append([_code(f.name), *[UNKNOWN] * 8])
            continue
        threads = ", ".join(f"{t} @{g}" for g, t in o.threads_by_grf)
        cap = f"{MAX_WORK_GROUP_SIZE}; 512 below SIMD32 at 256 GRF" + "".join(
            f"; {t} threads at {g} GRF" for g, t in o.wg_threads_by_grf
        )
        calculator = (
            f.calculator or "not listed: rows link it pre-filled" if o.xve_per_xe_core else f.calculator or "not listed"
        )
        rows.append([_code(f.name), threads, str(o.xve_per_xe_core or UNKNOWN), f"{o.slm_per_xe_core // 1024} KB",
                     f"{o.slm_per_work_group // 1024} KB", _steps(o.slm_steps_kb), cap,
                     str(o.max_work_groups or UNKNOWN), str(o.barriers or UNKNOWN), calculator])  # fmt: skip
    header = ["family", "threads/XVE by GRF", "XVE/Xe core", "SLM pool", "SLM/WG", "SLM steps (KB)", "work-group cap",
              "max WGs", "barriers", f"[Occupancy Calculator]({CALCULATOR_URL})"]  # fmt: skip
    return _table(header, rows)


GENERATORS: dict[str, Callable[[pins_mod.Pins], str]] = {
    "profiles": profiles_table,
    "ur-matrix": ur_matrix_table,
    "packages": packages_table,
    "targets": targets_table,
    "families": families_table,
    "occupancy": occupancy_table,
}


def render(text: str, pins: pins_mod.Pins, where: str = "") -> str:
    """``text`` with every generated region rewritten; an unknown or unclosed region is an error."""
    names = BEGIN_RE.findall(text)
    closed = [m.group(2) for m in REGION_RE.finditer(text)]
    for name in names:
        if name not in GENERATORS:
            raise XpukitError(f"{where}: unknown generated region {name!r}", f"use one of: {', '.join(GENERATORS)}")
    if len(closed) != len(names):
        raise XpukitError(f"{where}: a `<!-- generated:NAME -->` region has no `<!-- end -->`", "close it")

    def replace(match: re.Match[str]) -> str:
        return match.group(1) + GENERATORS[match.group(2)](pins) + match.group(4)

    return REGION_RE.sub(replace, text)


def update(files: Iterable[Path], check: bool, pins: pins_mod.Pins | None = None) -> list[Path]:
    """Rewrite (or, with ``check``, only compare) the regions; returns the files that differ(ed)."""
    pins = pins or pins_mod.load()
    rendered = {}
    for path in files:  # render every file before writing any: a bad region leaves all untouched
        text = path.read_text(encoding="utf-8")
        new = render(text, pins, str(path))
        if new != text:
            rendered[path] = new
    if not check:
        for path, new in rendered.items():
            path.write_text(new, encoding="utf-8")
    return list(rendered)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m xpukit.host.versions.docs_tables", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--check", action="store_true", help="only report the files whose tables differ")
    args = parser.parse_args(argv)
    try:
        changed = update(doc_files(), args.check)
    except XpukitError as exc:
        print(f"xpukit: error: {exc.one_line()}", file=sys.stderr)
        return 2
    root = layout.REPO_ROOT
    for path in changed:
        verb = "differs from env/pins.toml" if args.check else "updated"
        print(f"xpukit: {path.relative_to(root)}: {verb}")
    if args.check and changed:
        print("xpukit: error: generated tables are stale (fix: run `invoke docs`)", file=sys.stderr)
        return 1
    if not changed:
        print("xpukit: generated tables match env/pins.toml")
    return 0


if __name__ == "__main__":
    sys.exit(main())
