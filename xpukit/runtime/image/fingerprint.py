"""The fingerprint upstream asks bug reporters for (its capture-hw-details.sh: GPU, IGC, Level Zero,
driver, DLE_VERSION, PyTorch, compiler), as ``invoke doctor --report`` prints it: host facts plus
the image's probe (xpukit.runtime.image.doctor_probe), one ``name: value`` line each, scrubbed so it
is safe to paste: no user names, host names, home folders or tokens.

Standard library only: it runs in the cpu image too (tests/image/test_doctor_report.py)."""

from __future__ import annotations

import contextlib
import getpass
import os
import re
import socket
from collections.abc import Mapping
from typing import Any

FIELDS = (
    "GPU",
    "driver",
    "driver line",
    "IGC",
    "Level Zero",
    "DLE/OMIX",
    "compiler",
    "ocloc",
    "Triton",
    "PyTorch",
    "UR",
    "kernel",
)
UNKNOWN = "unknown"
# Token shapes of the services a developer here has credentials for (GitHub, GitLab, Hugging Face,
# Slack, AWS access keys), and any value of a variable named like a secret.
_TOKEN_RE = re.compile(
    r"(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,}|hf_[A-Za-z0-9]{20,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})"
)
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|API_?KEY|CREDENTIAL", re.I)


def _package(packages: Mapping[str, Any], *names: str) -> str:
    for name in names:
        entry = packages.get(name)
        if isinstance(entry, Mapping) and entry.get("version"):
            return f"{name} {entry['version']}"
    return ""


def image_facts(probe: Mapping[str, Any]) -> dict[str, str]:
    """The fields the image's probe answers."""
    stack = got if isinstance(got := probe.get("gpu_stack"), Mapping) else {}
    packages = got if isinstance(got := stack.get("packages"), Mapping) else {}
    ur = got if isinstance(got := probe.get("ur"), Mapping) else {}
    ze = got if isinstance(got := probe.get("level_zero"), Mapping) else {}
    oneapi = got if isinstance(got := probe.get("oneapi"), Mapping) else {}
    ocloc = got if isinstance(got := probe.get("ocloc"), Mapping) else {}
    installed = got if isinstance(got := probe.get("installed"), Mapping) else {}
    gpu = got if isinstance(got := ur.get("gpu"), Mapping) else {}
    dle = " ".join(
        filter(None, [f"DLE {stack['dle']}" if stack.get("dle") else "", _package(packages, "intel-omix-dev")])
    )
    runtime = _package(packages, "libze-intel-gpu1", "intel-opencl-icd", "intel-level-zero-gpu")
    driver = ", ".join(
        filter(None, [f"UR reports {gpu['driver_version']}" if gpu.get("driver_version") else "", runtime])
    )
    return {
        "driver": driver,
        "driver line": str(stack.get("driver_line", "")),
        "IGC": _package(packages, "libigc2", "libigc1"),
        "Level Zero": f"loader {ze['version']}" if ze.get("version") else "",
        "DLE/OMIX": dle,
        "compiler": f"oneAPI {oneapi['version']}" if oneapi.get("version") else "",
        "ocloc": str(ocloc.get("version", "")),
        "Triton": str(installed.get("triton", "") or ("not installed" if installed else "")),
        "PyTorch": str(installed.get("torch", "") or ("not installed" if installed else "")),
        "UR": " ".join(
            filter(None, [str(ur.get("release", "")), f"({ur['launch_form']})" if ur.get("launch_form") else ""])
        ),
        "kernel": str(probe.get("kernel", "")),
    }


def merge(host: Mapping[str, str], image: Mapping[str, str]) -> dict[str, str]:
    """One value per field: the host's where it knows (GPU, kernel, its driver line), else the image's."""
    out = {}
    for field in FIELDS:
        values = [v for v in (host.get(field, ""), image.get(field, "")) if v]
        if field in ("driver", "driver line") and len(values) == 2 and values[0] != values[1]:
            out[field] = f"host: {values[0]}; image: {values[1]}"
        else:
            out[field] = values[0] if values else UNKNOWN
    return out


def private_words(environ: Mapping[str, str] | None = None) -> list[str]:
    """What must never be pasted: this user's names, this machine's names, home folders, secrets."""
    environ = os.environ if environ is None else environ
    words = set()
    for getter in (getpass.getuser, socket.gethostname, socket.getfqdn):
        with contextlib.suppress(OSError, KeyError):
            words.add(getter())
    for key in ("USER", "LOGNAME", "HOME", "HOSTNAME"):
        if environ.get(key):
            words.add(environ[key])
    words |= {value for key, value in environ.items() if _SECRET_NAME.search(key) and len(value) >= 8}
    # Short or generic words would blank out real facts ("root" in a path, a one-letter host name).
    return sorted((w for w in words if len(w) >= 3 and w not in ("/", "root", "localhost")), key=len, reverse=True)


def scrub(text: str, private: list[str]) -> str:
    """``text`` with every private word replaced and every token-shaped string removed."""
    for word in private:
        text = re.sub(rf"(?<![\w.-]){re.escape(word)}(?![\w-])", "<redacted>", text)
    return _TOKEN_RE.sub("<token>", text)


def render(fields: Mapping[str, str], private: list[str]) -> list[str]:
    """The report's lines, in upstream's order, scrubbed."""
    width = max(len(f) for f in FIELDS)
    return [scrub(f"{field + ':':<{width + 1}} {fields.get(field) or UNKNOWN}", private) for field in FIELDS]
