"""Helpers the test_verify.py modules of several test folders share."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def _git(repo: Path, *args: str, date: str = "2001-09-09T01:46:40+00:00") -> str:
    env = {**os.environ, "GIT_COMMITTER_DATE": date, "GIT_AUTHOR_DATE": date}
    ident = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
    return subprocess.run(
        ["git", "-C", str(repo), *ident, *args], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
