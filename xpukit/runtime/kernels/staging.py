"""All-or-nothing output of a command that writes several files (``invoke compile``'s per-target
.spv, .zebin, .isa and .json): written into a private folder beside their destinations, moved
into place only once every one is written, and on a failure no trace of the run is left."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from xpukit.runtime.scratch import host_tag, remove_stale

STAGE_PREFIX = ".xpukit-compile-"  # <out>/.xpukit-compile-<pid>-<host>-*: a run's files until all are written


@contextlib.contextmanager
def staged_output(out_dir: Path) -> Iterator[Path]:
    """A private folder inside ``out_dir`` for a run's files (``<stage>/<target>/<file>``), moved to
    ``out_dir/<target>/<file>`` only when the block ends without an error. On an error (Ctrl-C
    included) nothing of the run is left: the stage goes, and so do the folders the run made
    (``out_dir`` and its parents, a new ``<target>/``); files it replaced are put back."""
    made = _make_folders(out_dir)
    remove_stale(STAGE_PREFIX, str(out_dir))  # those of runs killed before they could clean up
    stage = Path(tempfile.mkdtemp(prefix=f"{STAGE_PREFIX}{os.getpid()}-{host_tag()}-", dir=out_dir))
    added: list[Path] = []
    replaced: list[tuple[Path, Path]] = []  # (the old file, kept in the stage; where it was)
    try:
        yield stage
        keep = stage / ".replaced"
        for staged in sorted(stage.iterdir()):  # listed before ``keep`` is made
            dest = out_dir / staged.name
            if not dest.exists():  # a new target folder: moved whole
                os.rename(staged, dest)
                made.append(dest)
                continue
            for file in sorted(staged.iterdir()):
                if (dest / file.name).exists():
                    (keep / staged.name).mkdir(parents=True, exist_ok=True)
                    os.replace(dest / file.name, keep / staged.name / file.name)
                    replaced.append((keep / staged.name / file.name, dest / file.name))
                else:
                    added.append(dest / file.name)
                os.replace(file, dest / file.name)
    except BaseException:
        for path in added:
            path.unlink(missing_ok=True)
        for old, path in reversed(replaced):
            os.replace(old, path)
        for folder in reversed(made):
            shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _make_folders(folder: Path) -> list[Path]:
    """Make ``folder`` and its missing parents; the ones made, outermost first."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()][::-1]
    folder.mkdir(parents=True, exist_ok=True)
    return missing
