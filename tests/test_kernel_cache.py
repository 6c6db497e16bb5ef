"""The shared kernel cache (XPUKIT_KERNEL_CACHE=redis://...) with a real redis-server started here
on 127.0.0.1: two containers of the kit's image, each with an empty local Triton cache, stand for
two machines. The second gets every kernel the first compiled from Redis; Redis down costs one
warning and nothing else."""

from __future__ import annotations

import json

import pytest
from services import free_port, redis_server

from xpukit.runtime import kernel_cache


def run_probe(docker_client, image: str, url: str) -> tuple[dict, str]:
    """tests/kernel_cache_probe.py in a fresh container (host network: Redis listens on 127.0.0.1)."""
    from xpukit.host.pins import REPO_ROOT

    container = docker_client.containers.run(
        image,
        ["python", "/workspace/tests/kernel_cache_probe.py"],
        detach=True,
        network_mode="host",
        volumes={str(REPO_ROOT): {"bind": "/workspace", "mode": "ro"}},
        environment={
            "PYTHONPATH": "/workspace",
            "PYTHONDONTWRITEBYTECODE": "1",
            "TRITON_CACHE_DIR": "/tmp/triton",  # empty: a new machine
            "XPUKIT_CACHE_DIR": "/tmp/xpukit",
            "XPUKIT_KERNEL_CACHE": url,
        },
    )
    try:
        code = container.wait(timeout=600)["StatusCode"]
        out = container.logs(stdout=True, stderr=False).decode()
        err = container.logs(stdout=False, stderr=True).decode()
    finally:
        container.remove(force=True)
    assert code == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1]), err


@pytest.mark.unit
@pytest.mark.parametrize("url", ["http://127.0.0.1:6379", "redis://", "redis://host:port"])
def test_bad_kernel_cache_url_is_one_clear_error(url):
    with pytest.raises(kernel_cache.KernelCacheConfigError, match="XPUKIT_KERNEL_CACHE") as info:
        kernel_cache.RemoteStore(url)
    assert "\n" not in info.value.one_line()


@pytest.mark.docker
def test_second_machine_gets_every_kernel_from_redis(docker_client, test_image, tmp_path):
    with redis_server(tmp_path / "redis") as port:
        url = f"redis://127.0.0.1:{port}"
        first, _ = run_probe(docker_client, test_image, url)
        assert all(first["exact"]) and len(first["exact"]) == 6
        assert first["stores"] > 0 and first["hits"] == 0 and first["errors"] == 0
        second, _ = run_probe(docker_client, test_image, url)
        assert all(second["exact"])
        assert second["misses"] == 0 and second["errors"] == 0
        assert second["hits"] > 0  # Triton compiled nothing: every kernel came from Redis
        assert first["program_cache"] == second["program_cache"] == "SharedProgramCache"
        assert first["program_builds"] == 6 and first["program_shared_hits"] == 0
        # The native binaries the first machine's driver built: loaded, not rebuilt, on the second.
        assert second["program_shared_hits"] == 6 and second["program_builds"] == 0


@pytest.mark.docker
def test_redis_down_is_one_warning(docker_client, test_image):
    result, err = run_probe(docker_client, test_image, f"redis://127.0.0.1:{free_port()}")
    assert all(result["exact"]) and len(result["exact"]) == 6
    assert result["errors"] >= 1
    warnings = [ln for ln in err.splitlines() if "kernel cache" in ln and "unavailable" in ln]
    assert len(warnings) == 1, err[-2000:]
