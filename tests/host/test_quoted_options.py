"""The options that take several arguments in one quoted string (`--args`, `--pytest-args`,
`--script-args`, `--sbatch-args`) are split on the host as a shell splits them; a quote left open or
a lone trailing backslash is one line naming the option and the fix, exit 2, before anything runs.
Before: `ValueError: No closing quotation` from shlex, as a traceback, a dry run too."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from xpukit.errors import EXIT_USAGE, UsageError
from xpukit.host import inputs
from xpukit.layout import REPO_ROOT

pytestmark = pytest.mark.unit
KERNEL = "examples/kernels.py:scale_kernel"


@pytest.mark.parametrize(
    ("task", "args", "wants"),
    [
        ("demo-ur", ["--args", "--n '"], """--args "--n '": a quote is not closed"""),
        ("test", ["--pytest-args", "-k 'x"], """--pytest-args "-k 'x": a quote is not closed"""),
        ("test", ["--pytest-args", '-k "x'], """--pytest-args '-k "x': a quote is not closed"""),
        ("demo-ur", ["--args", "--n 4 \\"], "--args '--n 4 \\\\': it ends in a lone backslash"),
        ("kernel-report", [KERNEL, "--launched-by", "x.py", "--script-args", "'"], '--script-args "\'"'),
        ("matrix", ["--scheduler", "slurm", "--sbatch-args", "--time='30"], "--sbatch-args"),
    ],
)
@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "run"])
def test_an_unbalanced_quote_is_one_line_and_exit_2(tmp_path, task, args, wants, dry_run):
    env = {**os.environ, "XPUKIT_ENGINE": "docker", "DOCKER_HOST": "unix:///nonexistent.sock"}
    cmd = [sys.executable, "-m", "invoke", "-r", str(REPO_ROOT), task, *args, *(["--dry-run"] if dry_run else [])]
    p = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=120)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == EXIT_USAGE and len(lines) == 1, p.stderr
    assert lines[0].startswith("xpukit: error: ") and wants in lines[0] and "(fix: " in lines[0], lines[0]
    assert "Traceback" not in p.stderr and not p.stdout
    assert not list(tmp_path.iterdir()), "a refused task wrote something"


def test_balanced_quotes_split_as_a_shell_splits_them():
    assert inputs.words("pytest-args", "-k 'a or b' -x") == ["-k", "a or b", "-x"]
    assert inputs.words("args", "") == [] and inputs.words("args", None) == []  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="close it") as info:
        inputs.words("args", "'")
    assert info.value.exit_code == EXIT_USAGE
