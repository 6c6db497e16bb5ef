"""Unwritable cache folders: Triton's and the kit's fall back to a private temporary folder with one.

The tests that run against a container engine; the others are in tests/image/test_readonly.py.
"""

from __future__ import annotations

import pytest

EXAMPLE_RUNS = {
    "demo-ur, kernel[grid]": "python /opt/xpukit/src/examples/xpu_triton_ur.py --n 4096 --device cpu",
    "demo-ur, explicit": "python /opt/xpukit/src/examples/xpu_triton_ur.py --n 4096 --device cpu --launch explicit",
    "tutorial 01": "python /opt/xpukit/src/examples/tutorial_01_vector_add.py --size 4099 --device cpu",
    "tutorial 02": "python /opt/xpukit/src/examples/tutorial_02_fused_softmax.py --rows 37 --cols 129 --device cpu",
    "compile": "python -m xpukit compile /opt/xpukit/src/examples/kernels.py:scale_kernel --target pvc --out /tmp/out",
}


@pytest.mark.sharing_smoke
@pytest.mark.docker
def test_examples_run_in_a_read_only_container_without_a_cache_volume(docker_client, test_image):
    """``docker run --read-only --tmpfs /tmp``, no volume: every example passes, the first run of each
    says once per cache that it falls back, and no traceback appears."""
    failures = []
    for label, command in EXAMPLE_RUNS.items():
        container = docker_client.containers.run(
            test_image, ["bash", "-c", command], read_only=True, tmpfs={"/tmp": ""}, detach=True
        )
        try:
            status = container.wait(timeout=600)["StatusCode"]
            out = container.logs(stdout=True, stderr=False).decode(errors="replace")
            err = container.logs(stdout=False, stderr=True).decode(errors="replace")
        finally:
            container.remove(force=True)
        fallbacks = [ln for ln in err.splitlines() if "is not writable" in ln]
        if status != 0 or "Traceback" in err or not fallbacks or len(fallbacks) != len(set(fallbacks)):
            failures.append(f"{label}: exit {status}\n{out[-800:]}\n{err[-1500:]}")
    assert not failures, "\n\n".join(failures)


@pytest.mark.docker
def test_read_only_root_without_a_writable_tmp_says_so_in_one_line(docker_client, test_image):
    out = docker_client.containers.run(
        test_image, ["true"], read_only=True, remove=True, stdout=False, stderr=True
    ).decode()
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(lines) == 1 and "/tmp is not writable" in lines[0] and "--tmpfs /tmp" in lines[0], out
