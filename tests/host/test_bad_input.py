"""Bad input a user can type into a task: refused on the host, before anything runs (a dry run too),
with one line naming the option and the fix, and exit 2. Each case here used to be taken silently:
as the default, as the current folder, or passed on to fail later inside a container."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from xpukit.errors import EXIT_USAGE, UsageError
from xpukit.host import inputs, settings
from xpukit.host.build.pins import REPO_ROOT

pytestmark = pytest.mark.unit
KERNEL = "examples/kernels.py:scale_kernel"


@pytest.mark.parametrize(
    ("values", "wants"),
    [(["Bogus!"], "unknown --target 'Bogus!'"), (["pvc,x y"], "'x y'"), ([""], "no target given")],
)
def test_targets_are_checked_on_the_host(values, wants):
    with pytest.raises(UsageError, match=wants) as info:
        inputs.target_names(values)
    assert info.value.exit_code == EXIT_USAGE and "pvc" in info.value.fix


def test_known_targets_aliases_and_all_pass():
    assert inputs.target_names(["dg2, pvc", "pvc"]) == ["acm-g10", "pvc"]
    # Other ocloc device names go on to where ocloc runs (it alone knows its list).
    assert inputs.target_names(["tgllp,bmg-g31", "12.60.7"]) == ["tgllp", "bmg-g31", "12.60.7"]
    assert inputs.target_names(["all"]) == ["all"]
    assert inputs.target_names(None) == ["pvc"]


@pytest.mark.parametrize("item", ["X", "=4", "X=", "1X=2", "A=1,B"])
def test_name_value_items(item):
    with pytest.raises(UsageError, match="is not NAME=VALUE"):
        inputs.assignments("config", [item], comma=True)
    assert inputs.assignments("config", ["A=1,B_2=x"], comma=True) == ["A=1,B_2=x"]


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "soon"])
def test_a_time_limit_is_a_finite_number_of_seconds(value):
    with pytest.raises(UsageError, match="is not a number of seconds"):
        inputs.seconds("timeout", value)
    assert inputs.seconds("timeout", 0) == 0


@pytest.mark.parametrize(
    ("flags", "environ", "wants"),
    [
        ({"base_suite": ""}, {}, "--suite is empty"),
        ({"profile": ""}, {}, "--profile is empty"),
        ({"base_mirror": "deb.debian.org/debian"}, {}, "is not an http(s) URL"),
        ({}, {"XPUKIT_CACHE_VOLUME": "my cache"}, "is not a volume name"),
        ({"profile": "gpu"}, {}, "unknown profile 'gpu'"),
    ],
)
def test_settings_refuse_empty_flags_and_malformed_values(flags, environ, wants):
    with pytest.raises(UsageError, match=wants.replace("(", r"\(").replace(")", r"\)")):
        settings.resolve(flags, {}, environ)


@pytest.mark.parametrize(
    ("task", "args", "wants"),
    [
        ("compile", [KERNEL, "--target", "Bogus!"], "unknown --target 'Bogus!'"),
        ("compile", [KERNEL, "--out", ""], "--out is empty"),
        ("kernel-report", [KERNEL, "--config", "BLOCK_SIZE"], "--config 'BLOCK_SIZE' is not NAME=VALUE"),
        ("devcontainer", ["--out", ""], "--out is empty"),
        ("matrix", ["--timeout", "-1"], "is not a number of seconds"),
        ("compile", [KERNEL, "--num-warps", "3"], "--num-warps 3 is not a power of two"),
        ("kernel-report", [KERNEL, "--format", "xml"], "unknown format 'xml'"),
        ("export", ["--out", "x.tar", "--format", "tar"], "unknown --format 'tar'"),
        ("zebin-info", [""], "FILE: no such file"),
        ("build", ["--triton", ""], "--triton is empty"),
        ("build", ["--torch-arch-list", " "], "--torch-arch-list is empty"),
        ("verify", ["--against", "bogus"], "unknown --against 'bogus'"),
        ("compile", ["examples/nope.py:k"], "is not path.py:function of an existing file"),
    ],
)
def test_tasks_refuse_it_in_one_line_with_exit_2_and_write_nothing(tmp_path, task, args, wants):
    env = {**os.environ, "XPUKIT_ENGINE": "docker", "DOCKER_HOST": "unix:///nonexistent.sock"}
    p = subprocess.run([sys.executable, "-m", "invoke", "-r", str(REPO_ROOT), task, *args, "--dry-run"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, check=False)  # fmt: skip
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("xpukit: error:")]
    assert p.returncode == EXIT_USAGE and len(errors) == 1 and wants in errors[0], p.stderr
    assert "(fix: " in errors[0] and "Traceback" not in p.stderr
    assert not list(tmp_path.iterdir()), "a refused task wrote something"
