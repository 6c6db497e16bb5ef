"""kernel-report: every target x config compiled for real, one table; bad input as one line each.

The tests that run against a container engine; the others are in tests/image/test_kernel_report.py.
"""

from __future__ import annotations

import json

import pytest

from tests.support.invoke import invoke_with_cache


@pytest.mark.docker
def test_invoke_json_report_is_all_of_stdout(test_image, tmp_path):
    """`--format json` through invoke: stdout parses as the report; the kit's progress lines
    (profile, base, any build log) went to stderr. The same command again is a stored-report hit:
    no container (no "compiling" line), the same report; --diff finds no earlier report to compare."""
    command = ("kernel-report", "examples/kernels.py:scale_kernel", "--target", "pvc", "--format", "json")
    result = invoke_with_cache(*command, cache=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert report and "xpukit:" not in result.stdout
    assert "xpukit: compiling every target x config in the image" in result.stderr
    assert list((tmp_path / "triton-cache").iterdir())  # Triton's cache persists in the kit's folder
    again = invoke_with_cache(*command, "--diff", cache=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "compiling" not in again.stderr and f"the report of {report['stored_at']}" in again.stderr
    assert json.loads(again.stdout) == report
    assert "No previous report of this kernel." in again.stderr  # JSON on stdout: the diff goes to stderr
