"""A build that cannot reach the network is diagnosed as the network, never as a pin (issue 22).

apt answers an unreachable mirror with warnings during `apt-get update`, then "Unable to locate
package" for every package: the real apt, on a mirror that does not resolve, shows both.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from xpukit.host.image import buildlog

pytestmark = pytest.mark.unit


def _apt(tmp: Path, *args: str) -> list[str]:
    for sub in ("lists/partial", "cache/archives/partial"):
        (tmp / sub).mkdir(parents=True, exist_ok=True)
    (tmp / "status").write_text("")
    (tmp / "sources.list").write_text("deb http://xpukit-no-such-host.invalid/debian bookworm main\n")
    options = [
        f"-o=Dir::Etc::sourcelist={tmp}/sources.list",
        "-o=Dir::Etc::sourceparts=-",
        f"-o=Dir::State::Lists={tmp}/lists",
        f"-o=Dir::Cache={tmp}/cache",
        f"-o=Dir::State::status={tmp}/status",
        "-o=Debug::NoLocking=1",
    ]
    out = subprocess.run(["apt-get", *options, *args], capture_output=True, text=True, timeout=120, check=False)
    return (out.stdout + out.stderr).splitlines()


def test_apt_without_a_reachable_mirror_is_the_network_not_a_pin(tmp_path):
    if shutil.which("apt-get") is None:
        pytest.skip("needs apt-get (Debian or Ubuntu)")
    log = _apt(tmp_path, "update") + _apt(tmp_path, "install", "-s", "python3=3.11.2-1+b1")
    assert any("Unable to locate package python3" in line for line in log), log[-5:]
    found = buildlog.diagnose(log)
    assert found and "could not reach the network" in found.cause, found
    assert "env/pins.toml" not in found.fix and "XPUKIT_BUILD_NETWORK=host" in found.fix


@pytest.mark.parametrize(
    "line",
    [
        "#7 1.2 W: Failed to fetch http://deb.debian.org/debian/dists/bookworm/InRelease  "
        "Temporary failure resolving 'deb.debian.org'",
        "Err:1 http://deb.debian.org/debian bookworm InRelease Could not connect to deb.debian.org:80 (151.101.2.132)",
        "W: Some index files failed to download. They have been ignored, or old ones used instead.",
    ],
)
def test_apts_offline_words_come_before_a_missing_package(line):
    """apt's wording in a sandbox with no DNS or no route (no such network here to reproduce it)."""
    found = buildlog.diagnose([line, "E: Package 'python3' has no installation candidate"])
    assert found and "could not reach the network" in found.cause
    alone = buildlog.diagnose(["E: Package 'python3' has no installation candidate"])
    assert alone and alone.cause == "package python3 is not available"  # a real missing pin stays a pin
