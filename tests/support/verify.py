"""Helpers the test_verify.py modules of several test folders share."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from xpukit import layout
from xpukit.host.image import build

# The sharing lock is no content (build.NOT_CONTENT): untracked in a copy, so that a test writing
# it leaves the copy's commit clean (no "-dirty" revision label, the same image).
UNTRACKED = "env/lock/images.toml"


def _git(repo: Path, *args: str, date: str = "2001-09-09T01:46:40+00:00") -> str:
    env = {**os.environ, "GIT_COMMITTER_DATE": date, "GIT_AUTHOR_DATE": date}
    ident = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
    return subprocess.run(
        ["git", "-C", str(repo), *ident, *args], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


def checkout_copy(dest: Path, dockerfile: str = "", whole: bool = False) -> Path:
    """This tree's build context and tasks as a fresh git commit (a fixed commit time, the lock
    untracked); ``dockerfile``: that Dockerfile instead of the kit's; ``whole``: every file git
    lists (tracked and not ignored, as in the working tree), for tasks that read more than the
    build context (`invoke test` mounts the checkout: README.md, docs/, .ci/)."""
    root = layout.REPO_ROOT
    if whole:
        listed = _git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
        for name in sorted(set(filter(None, listed))):
            src = root / name
            if src.is_file() or src.is_symlink():
                (dest / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / name, follow_symlinks=False)
    else:
        build.copy_context(root, dest)
        for name in ("tasks.py", "invoke.yaml"):
            if (root / name).exists():
                shutil.copy2(root / name, dest / name)
    if dockerfile:
        (dest / "Dockerfile").write_text(dockerfile)
    _git(dest, "init", "-q")
    (dest / ".git" / "info").mkdir(parents=True, exist_ok=True)
    with open(dest / ".git" / "info" / "exclude", "a") as exclude:
        exclude.write(f"/{UNTRACKED}\n")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", "verify test")
    return dest
