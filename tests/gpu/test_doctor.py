"""`invoke doctor` against fake hosts (sysfs + /dev in tmp_path) and a fake container runner.

The tests that run on an Intel GPU host; the others are in tests/host/test_doctor.py.
"""

from __future__ import annotations

import pytest

from tests.support.doctor import BUILDKIT_OK, ENGINE_OK, TB, lines_for
from xpukit.host.doctor import checkup as doctor

pytestmark = pytest.mark.unit


@pytest.mark.gpu
def test_doctor_on_this_gpu_host_finds_the_gpu():
    lines: list[str] = []
    doctor.run_doctor(
        doctor.DoctorOptions(engine_probe=ENGINE_OK, buildkit_probe=BUILDKIT_OK, free_bytes=TB),
        out=lines.append,
    )
    gpu_lines = lines_for(lines, "gpu")
    assert gpu_lines and all(line.startswith("OK") for line in gpu_lines), lines
    assert all(line.startswith("OK") for line in lines_for(lines, "driver")), lines
