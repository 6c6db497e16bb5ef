"""Markers decide where a test runs (see pyproject.toml), and each folder holds one kind:
tests/host (unit), tests/engine (docker), tests/image (container), tests/gpu (gpu); shared helpers
live in tests/support. This file holds each test to its folder and decides what to skip, and why.

- gpu: skipped unless the host has an Intel GPU render node.
- container: needs Triton, UR and ocloc. Inside the image (XPUKIT_IN_CONTAINER=1) it always runs;
  on a host without that runtime it is skipped with the reason (`invoke test` runs it in the image).
- docker: needs an engine and the image `invoke test` built (XPUKIT_TEST_IMAGE). With
  XPUKIT_REQUIRE_DOCKER=1 a missing engine fails these tests instead of skipping them.

No test talks to a team's shared kernel cache: XPUKIT_KERNEL_CACHE and its files are unset for
every test (`invoke test` passes them into the image like every task); a test that needs a cache
starts its own Redis.
"""

from __future__ import annotations

import importlib.util
import os
import signal
from pathlib import Path

import pytest

# A run started in the background of a script (`nohup .ci/run &`) inherits SIGINT ignored, and
# Python then leaves it ignored: the Ctrl-C tests (theirs and their children's) would see no
# Ctrl-C. Tests run as from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _runtime_missing() -> str:
    if os.environ.get("XPUKIT_IN_CONTAINER") == "1":
        return ""
    for module in ("triton", "numpy", "yaml", "elftools"):
        if importlib.util.find_spec(module) is None:
            return f"needs the kit's runtime ({module} is not installed here); `invoke test` runs it in the image"
    return ""


# folder -> the marker its tests carry; a test that needs more than its folder says is misplaced
FOLDER_MARKER = {"host": "unit", "engine": "docker", "image": "container", "gpu": "gpu"}
MORE_DEMANDING = {
    "unit": {"docker", "container", "gpu"},
    "docker": {"gpu"},
    "container": {"docker", "gpu"},
    "gpu": set(),
}


def misplaced(items: list[pytest.Item]) -> list[str]:
    """Tests whose markers do not match the folder they live in."""
    wrong = []
    for item in items:
        want = FOLDER_MARKER.get(Path(str(item.path)).parent.name)
        marks = {m.name for m in item.iter_markers()} & set(MORE_DEMANDING)
        if want is None or want not in marks or marks & MORE_DEMANDING[want]:
            wrong.append(f"{item.nodeid} ({', '.join(sorted(marks)) or 'no marker'})")
    return wrong


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from xpukit.host.gpu import has_intel_gpu

    has_gpu, why_not_gpu = has_intel_gpu()
    runtime_missing = _runtime_missing()
    # `invoke test` selects by marker: a test with none would silently never run.
    unmarked = [item.nodeid for item in items if not {"unit", "docker", "container", "gpu"} & set(item.keywords)]
    if unmarked:
        raise pytest.UsageError(f"tests without a unit/docker/container/gpu marker: {', '.join(unmarked[:5])}")
    wrong = misplaced(items)
    if wrong:
        raise pytest.UsageError(
            f"tests in the wrong folder for their marker ({', '.join(wrong[:5])}): "
            "tests/host is unit, tests/engine docker, tests/image container, tests/gpu gpu"
        )
    for item in items:
        if "gpu" in item.keywords and not has_gpu:
            item.add_marker(pytest.mark.skip(reason=f"needs an Intel GPU: {why_not_gpu}"))
        elif "container" in item.keywords and runtime_missing:
            item.add_marker(pytest.mark.skip(reason=runtime_missing))


@pytest.fixture(autouse=True)
def _no_team_kernel_cache(monkeypatch):
    for name in ("XPUKIT_KERNEL_CACHE", "XPUKIT_KERNEL_CACHE_KEY_FILE", "XPUKIT_KERNEL_CACHE_PASSWORD_FILE",
                 "XPUKIT_KERNEL_CACHE_CA_FILE", "XPUKIT_KERNEL_CACHE_DEBUG"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def docker_client():
    """A docker SDK client for the engine `invoke test` used; skip (or fail) without one."""
    from xpukit.errors import XpukitError
    from xpukit.host import engine

    try:
        sdk = engine.client(os.environ.get("DOCKER_HOST", ""), timeout=600)
    except XpukitError as exc:
        if os.environ.get("XPUKIT_REQUIRE_DOCKER") == "1":
            pytest.fail(f"XPUKIT_REQUIRE_DOCKER=1 but {exc.one_line()}")
        pytest.skip(f"needs a Docker engine: {exc.message}")
    yield sdk
    sdk.close()


@pytest.fixture(scope="session")
def test_image(docker_client) -> str:
    """The image `invoke test` built for this run."""
    tag = os.environ.get("XPUKIT_TEST_IMAGE", "")
    if not tag:
        if os.environ.get("XPUKIT_REQUIRE_DOCKER") == "1":
            pytest.fail("XPUKIT_REQUIRE_DOCKER=1 but XPUKIT_TEST_IMAGE is not set (run the tests with `invoke test`)")
        pytest.skip("needs the image built by `invoke test` (XPUKIT_TEST_IMAGE is not set)")
    return tag


@pytest.fixture(scope="module")
def drv(tmp_path_factory):
    """xpukit's Triton driver with a program cache of the module's own (tests/image and tests/gpu)."""
    from xpukit.runtime.triton import URDriver
    from xpukit.runtime.triton.launch import ProgramCache

    return URDriver(cache=ProgramCache(tmp_path_factory.mktemp("programs")))
