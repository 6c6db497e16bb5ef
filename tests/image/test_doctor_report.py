"""`invoke doctor`'s probe and --report in the image (issue 30): the cpu image has no GPU stack,
so the report must still run, say what it cannot know, and read the real Triton wheel right."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from xpukit.host.doctor import checkup
from xpukit.runtime.image import fingerprint

pytestmark = pytest.mark.container


@pytest.fixture(scope="module")
def probe() -> dict:
    """The probe as the doctor runs it: a separate interpreter, JSON on stdout."""
    out = subprocess.run(
        [sys.executable, "-m", "xpukit.runtime.image.doctor_probe"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout)


def test_the_installed_xpu_triton_is_not_taken_for_a_shadowing_wheel(probe):
    dists = probe["triton_dists"]
    assert dists["intel_backend"] is True and dists["location"].endswith("/triton")
    assert list(dists["distributions"]) == ["triton-xpu"], dists


def test_the_cpu_image_probe_reports_no_gpu_stack_and_no_driver_line(probe):
    assert probe["gpu_stack"]["driver_line"] == ""
    for name, entry in probe["gpu_stack"]["packages"].items():  # whatever dpkg holds, each with its version
        assert entry["version"] and isinstance(entry["held"], bool), name
    assert probe["render_nodes"] == [] and probe["kernel"]


def test_report_runs_here_and_is_safe_to_paste(probe):
    fields = fingerprint.merge(checkup.host_facts(), fingerprint.image_facts(probe))
    lines = fingerprint.render(fields, fingerprint.private_words())
    values = {k: v.strip() for k, v in (line.split(":", 1) for line in lines)}
    assert list(values) == list(fingerprint.FIELDS)
    assert values["Triton"].startswith("3.3") and values["UR"].split()[0].startswith("2026")
    assert values["ocloc"] and values["PyTorch"] == "not installed" and values["kernel"]
    text = "\n".join(lines)
    assert socket.gethostname() not in text  # the container's id as host name
