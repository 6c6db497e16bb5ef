"""`invoke doctor` against fake hosts (sysfs + /dev in tmp_path) and a fake container runner.

The tests that run inside the image; the others are in tests/host/test_doctor.py.
"""

from __future__ import annotations

import pytest

from xpukit.host.doctor import host as doctor_host

pytestmark = pytest.mark.unit


@pytest.mark.container
def test_host_run_check_passes_where_the_runtime_is():
    """In the image (or a host with the runtime) every piece is there, found by the real probes."""
    found = doctor_host.check_host_run()
    assert found.status == "ok" and "ocloc" in found.found, found.line()
