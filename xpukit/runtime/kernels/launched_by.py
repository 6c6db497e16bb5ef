"""``kernel-report --launched-by SCRIPT``: the kernel as a script's own launches specialized it.

The script runs once, in a child process (its ``sys.exit``, argument parsing, threads and imports
never touch the report's process), on the device the image has (the CPU device here), through the
kit's launch path. Triton calls ``JITFunction.cache_hook`` before each compile of a specialization it
has not seen in that process: the hook records, for the kernel asked about, the argument types the
launch bound, its constexprs, which arguments Triton found 16-aligned or divisible by 16
(``tt.divisibility``), which ints were 1 (compiled as constants) and num_warps/num_stages/grf_mode.
The report then compiles each distinct record for every ``--target`` as ``launch 1``, ``launch 2``...

    python -m xpukit.runtime.kernels.launched_by OUT.json KERNEL_FILE KERNEL_NAME SCRIPT [ARGS...]
"""

from __future__ import annotations

import ctypes
import json
import os
import runpy
import shlex
import signal
import subprocess
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xpukit.errors import XpukitError
from xpukit.runtime.offline.specialization import Specialization

_OPTIONS = ("num_warps", "num_stages", "grf_mode")


def _record(data: dict[str, Any], arg_names: Sequence[str], params: Sequence[Any]) -> dict[str, Any]:
    """One compile's specialization data (Triton's ``serialize_specialization_data``) as a record."""
    signature: dict[str, str] = data["signature"]
    constants = {
        arg_names[key[0]]: value for key, value in zip(data["constant_keys"], data["constant_vals"], strict=True)
    }
    divisible = {arg_names[key[0]] for key, value in zip(data["attrs_keys"], data["attrs_vals"], strict=True) if value}
    annotated = {getattr(p, "name", None) for p in params if getattr(p, "is_constexpr", False)}
    equal_1 = sorted(
        n for n, v in constants.items() if n not in annotated and v == 1 and signature.get(n) == "constexpr"
    )
    constexprs = {n: v for n, v in constants.items() if n not in equal_1}
    types = {n: t for n, t in signature.items() if t != "constexpr"}
    options = data.get("options") or {}
    return {
        "types": types,
        "constexprs": constexprs,
        "options": {k: options[k] for k in _OPTIONS if isinstance(options.get(k), (int, str))},
        "specialization": Specialization(
            "launch",
            tuple(n for n in arg_names if n in divisible and types.get(n, "").startswith("*")),
            tuple(n for n in arg_names if n in divisible and n in types and not types[n].startswith("*")),
            tuple(equal_1),
        ).to_dict(),
    }


_PARENT = "XPUKIT_LAUNCHED_BY_PARENT"  # the report's pid, for the child


def _die_with_parent() -> None:
    """The script ends with the report that runs it: a SIGTERM or SIGKILL of the report left it
    running on its own (Linux's PR_SET_PDEATHSIG; elsewhere nothing)."""
    parent = os.environ.pop(_PARENT, "")
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if parent.isdigit() and os.getppid() != int(parent):  # the report ended before the call
        os._exit(143)


def _raised(exc: BaseException, script: Path) -> str:
    """``run.py:16: RuntimeError: boom``: the exception's first line at the innermost frame of the
    user's code (the script's folder), else of the script itself."""
    every = list(traceback.extract_tb(exc.__traceback__))
    folder = script.resolve().parent
    mine = [f for f in every if Path(f.filename).resolve().is_relative_to(folder)]
    frames = mine or [f for f in every if f.filename == str(script)]
    text = str(exc).strip().splitlines()
    what = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
    return f"{Path(frames[-1].filename).name}:{frames[-1].lineno}: {what}" if frames else what


def _child(out: Path, kernel_file: Path, kernel_name: str, script: Path, args: list[str]) -> int:
    """Run the script with the hook installed; write the records (whole) and return its exit code.
    An exception the script raises is recorded in one line (the report says it), not printed."""
    _die_with_parent()
    from triton.runtime.jit import JITFunction

    target = kernel_file.resolve()
    records: list[dict[str, Any]] = []

    def cache_hook(**kwargs: Any) -> bool:
        jit = kwargs["fn"].jit_function
        code = getattr(getattr(jit, "fn", None), "__code__", None)
        if kwargs["fn"].name == kernel_name and code is not None and Path(code.co_filename).resolve() == target:
            data = json.loads(kwargs["compile"]["specialization_data"])
            record = _record(data, list(jit.arg_names), list(getattr(jit, "params", ())))
            if record not in records:
                records.append(record)
        return False  # compile and launch as usual

    JITFunction.cache_hook = cache_hook
    sys.argv = [str(script), *args]
    sys.path.insert(0, str(script.resolve().parent))
    code, error = 0, None
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        code, error = 130, "interrupted"
    except BaseException as exc:  # the script's own error: reported in one line by the report
        code, error = 1, _raised(exc, script)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(json.dumps({"exit": code, "error": error, "launches": records}, default=str))
    os.replace(tmp, out)
    return 0


def record_launches(
    kernel_file: Path, kernel_name: str, script: Path, args: Sequence[str], work: Path, shown: str | None = None
) -> list[dict]:
    """Run ``script`` once with ``args`` and return its distinct specializations of the kernel.
    ``shown``: the script's path as the user gave it (in the image ``script`` is under /workspace)."""
    shown = shown or str(script)
    if not script.is_file():
        raise XpukitError(
            f"--launched-by {shown}: no such file", "give the path of a Python script that launches the kernel"
        )
    out = work / f"launches-{os.getpid()}.json"
    command = [sys.executable, "-m", __name__, str(out), str(kernel_file), kernel_name, str(script), *args]
    run = shlex.join([shown, *args])
    print(f"xpukit: running {run} to record its launches of {kernel_name} (Ctrl-C stops it)", file=sys.stderr)
    try:
        proc = subprocess.run(command, stdout=sys.stderr, check=False, env={**os.environ, _PARENT: str(os.getpid())})
        if not out.is_file():
            raise XpukitError(
                f"{shown} ended (exit {proc.returncode}) before its launches were recorded",
                f"run it alone to see why: python {run} (invoke shell), then try again",
            )
        result = json.loads(out.read_text())
    finally:
        out.unlink(missing_ok=True)
    launches, error = result["launches"], result.get("error")
    ended = f"raised {error}" if error and error != "interrupted" else (error or f"exit {result['exit']}")
    if not launches:
        fix = "give a script that launches this kernel, or --script-args that make it do so"
        if error and error != "interrupted":
            fix = f"fix the script (run it alone for the whole traceback: python {run}), then try again"
        raise XpukitError(f"{shown} ({ended}) launched no {kernel_name} from {kernel_file.name}", fix)
    if result["exit"]:
        print(
            f"xpukit: warning: {shown} ended ({ended}) after {len(launches)} launch specialization(s); reporting those",
            file=sys.stderr,
        )
    return list(launches)


if __name__ == "__main__":
    sys.exit(_child(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4]), sys.argv[5:]))
