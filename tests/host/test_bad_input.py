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
from xpukit.layout import REPO_ROOT

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


# The UR demo's own boundary (examples/xpu_triton_ur.py: guard(..., prog=None, any_error=True)) around
# what it does first, opening a UR session: `invoke demo-ur --where host` needs Triton on the host to
# get there; tests/image/test_examples_bad_input.py runs the demo itself the same way.
UR_SESSION = (
    "import sys; from xpukit.errors import guard; from xpukit.runtime import ur; "
    "sys.exit(guard(lambda: ur.Session('cpu'), prog=None, any_error=True))"
)


@pytest.mark.parametrize("icd", ["", "OCL_ICD_FILENAMES", "OCL_ICD_VENDORS", "long path"])
def test_a_ur_loader_that_is_not_one_is_refused_in_one_line(tmp_path, icd):
    """XPUKIT_UR_LOADER naming zlib: one line of at most 200 characters saying so, with the fix,
    whatever the OpenCL environment (before: a 300-character UnsupportedURRelease, or an OSError
    about libsvml.so, by whether Intel's CPU runtime was found)."""
    from tests.support import system_libz

    libz = system_libz()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OCL_ICD_")}
    env.update(XPUKIT_UR_LOADER=str(libz), PYTHONPATH=str(REPO_ROOT))
    if icd == "OCL_ICD_FILENAMES":
        env[icd] = str(tmp_path / "libintelocl.so")
    elif icd == "OCL_ICD_VENDORS":
        (tmp_path / "intel.icd").write_text("libintelocl.so\n")
        env[icd] = str(tmp_path)
    elif icd == "long path":  # the path is what the line cuts, never the problem or the fix
        deep = tmp_path / ("d" * 150)
        deep.mkdir()
        (deep / "libz.so.1").symlink_to(libz)
        env["XPUKIT_UR_LOADER"] = str(deep / "libz.so.1")
    p = subprocess.run([sys.executable, "-c", UR_SESSION], env=env, capture_output=True, text=True, check=False)
    lines = p.stderr.strip().splitlines()
    assert p.returncode != 0 and len(lines) == 1, p.stderr
    assert len(lines[0]) <= 200, lines[0]
    assert "XPUKIT_UR_LOADER names is not a Unified Runtime loader" in lines[0], lines[0]
    assert lines[0].endswith("(fix: point it at libur_loader.so.0 or unset it)"), lines[0]
    assert "Traceback" not in p.stderr and "libsvml" not in p.stderr
    if icd != "long path":
        assert f"{libz} (no urLoaderInit)" in lines[0], lines[0]
