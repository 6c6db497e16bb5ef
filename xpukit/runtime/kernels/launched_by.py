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

import json
import os
import runpy
import subprocess
import sys
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


def _child(out: Path, kernel_file: Path, kernel_name: str, script: Path, args: list[str]) -> int:
    """Run the script with the hook installed; write the records (whole) and return its exit code."""
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
    code = 0
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(json.dumps({"exit": code, "launches": records}, default=str))
    os.replace(tmp, out)
    return 0


def record_launches(kernel_file: Path, kernel_name: str, script: Path, args: Sequence[str], work: Path) -> list[dict]:
    """Run ``script`` once with ``args`` and return its distinct specializations of the kernel."""
    if not script.is_file():
        raise XpukitError(
            f"--launched-by {script}: no such file", "give the path of a Python script that launches the kernel"
        )
    out = work / f"launches-{os.getpid()}.json"
    command = [sys.executable, "-m", __name__, str(out), str(kernel_file), kernel_name, str(script), *args]
    print(f"xpukit: running {script} {' '.join(args)} to record its launches of {kernel_name}", file=sys.stderr)
    try:
        proc = subprocess.run(command, stdout=sys.stderr, check=False)
        if not out.is_file():
            raise XpukitError(
                f"{script} ended (exit {proc.returncode}) before its launches were recorded",
                "run the script alone to see its error (invoke shell), then try again",
            )
        result = json.loads(out.read_text())
    finally:
        out.unlink(missing_ok=True)
    launches = result["launches"]
    if not launches:
        raise XpukitError(
            f"{script} (exit {result['exit']}) launched no {kernel_name} from {kernel_file.name}",
            "give a script that launches this kernel, or --script-args that make it do so",
        )
    if result["exit"]:
        print(
            f"xpukit: warning: {script} exited {result['exit']} after {len(launches)} launch specialization(s)",
            file=sys.stderr,
        )
    return list(launches)


if __name__ == "__main__":
    sys.exit(_child(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4]), sys.argv[5:]))
