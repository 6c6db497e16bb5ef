"""``kernel-report --watch``: the per-line view on http://127.0.0.1:PORT/, compiled again on each save.

watchdog reports the kernel's file changing (editors save in place or by rename; both count), or a
module of the user's that it imports (a ``@triton.jit`` helper's file: both are imported again); the
report is built again in this process (Triton already imported: the warm path), and the page is told
over Server-Sent Events to reload. The page is the ``--format html`` page itself: source and counts
in its HTML, script only for switching families and for the reload; without script it refreshes
itself every few seconds. The server (``watch_server``) serves only ``/`` and ``/events``, on
127.0.0.1 only, to a browser that names it 127.0.0.1 or localhost.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from xpukit.errors import UsageError, XpukitError
from xpukit.runtime.kernels.compile import NATIVE_MEMORY, imported_user_files
from xpukit.runtime.kernels.kernel_report import build_report
from xpukit.runtime.kernels.watch_server import (
    HOST,
    LIFELINE_ENV,
    WatchState,
    follow_lifeline,
    render_page,
    start_server,
)
from xpukit.runtime.offline.baseline import apply_baseline
from xpukit.runtime.offline.report_model import Report, ReportOptions

_DEBOUNCE_S = 0.05  # an editor's save is several events (write, rename, chmod) in a few ms
_REAPPEAR_S = 0.5  # a save by delete-and-recreate leaves the file missing for a moment: not a deletion
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)  # `docker stop`, a closed terminal: both end like Ctrl-C


def _status(took: float, save: int) -> str:
    """The page's status line; the save's number tells two compiles in one second apart."""
    what = f"save {save} compiled" if save else "compiled"
    return f"{what} in {took:.1f} s at {time.strftime('%H:%M:%S')}"


def _builds(counts: Counter[str]) -> str:
    """ "ocloc: 5 built, 2 reused, speculation used 1" for the terminal."""
    parts = [f"{counts[k]} {k}" for k in ("built", "reused") if counts[k]]
    parts += [f"{k}: {counts[k]}" for k in sorted(counts) if k.startswith("speculation")]
    return "ocloc: " + (", ".join(parts) or "nothing to build")


def _stop_like_ctrl_c(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _present(file: Path) -> bool:
    """Whether the file is there, allowing an editor's delete-and-recreate a moment to finish."""
    deadline = time.monotonic() + _REAPPEAR_S
    while not file.is_file():
        if time.monotonic() > deadline:
            return False
        time.sleep(_DEBOUNCE_S)
    return True


def _absent(file: Path) -> str:
    """What the watched path is now that it is no file: deleted, or something else in its place."""
    if file.is_dir():
        return f"{file} is a folder now"
    if file.is_symlink():
        return f"{file} links to {os.readlink(file)}, which is no file"
    return f"{file} was deleted"


def _did_not_compile(report: Report) -> str | None:
    """The first failed cell's error when no cell compiled (a mistake in the kernel), else None."""
    failed = report.failed
    if not failed or len(failed) < len(report.rows):
        return None
    first = failed[0]
    return f"{first.target} {first.config}: {first.error}"


def compare_with_pinned(report: Report, pinned: Report) -> None:
    """Each row against the pinned compile's row of its target and config, lines matched by text."""
    for row in report.rows:
        base = pinned.row(row.target, row.config)
        if base is not None:
            apply_baseline(row, base, report.kernel_source, pinned.kernel_source)
            if row.baseline is not None:
                row.baseline.config += " (pinned: the watch's first compile)"


def watch_report(options: ReportOptions, port: int = 0) -> int:
    """Serve the per-line report and rebuild it on every save of the kernel's file until Ctrl-C
    (or SIGTERM, SIGHUP, or the end of the invoke that started it: see ``LIFELINE_ENV``)."""
    from watchdog.events import FileSystemEvent, FileSystemEventHandler
    from watchdog.observers import Observer

    options = dataclasses.replace(options, lines=True)
    # The path as given, made absolute but not resolved: when it is (or becomes) a link, a save of
    # the link's target is a save of it too (both folders are watched).
    file = Path(os.path.abspath(Path(options.kernel.rpartition(":")[0]).expanduser()))
    if not file.is_file():
        raise UsageError(f"kernel file {file} not found", "give the path to a .py file")
    for signum in _STOP_SIGNALS:
        signal.signal(signum, _stop_like_ctrl_c)
    lifeline = os.environ.get(LIFELINE_ENV, "")
    if lifeline:  # its invoke gone (even by SIGKILL): stop as `docker stop` stops the watch
        follow_lifeline(lifeline, lambda: os.kill(os.getpid(), signal.SIGTERM))
    state = WatchState()

    def build(fresh: bool) -> Report:
        return build_report(options, fresh=fresh)

    # The port first: one in use is said before a first compile of every family (minutes cold).
    server = start_server(state, port)
    try:
        started = time.monotonic()
        report = build(False)  # a first compile error is the user's to fix before watching
    except BaseException:
        server.stop()
        raise
    failure = _did_not_compile(report)
    if failure:
        print(f"xpukit: watch: the kernel did not compile: {failure}", file=sys.stderr, flush=True)
    # Each save is compared line by line with the first compile, pinned (unless a --baseline-* is given).
    pinned = None if options.baseline_config or options.baseline_target else report
    state.publish(functools.partial(render_page, report, None, _status(time.monotonic() - started, 0), "ok"))
    saved = threading.Event()
    watched: set[str] = set()  # the folders scheduled: the file's, and its link target's

    helpers: set[Path] = set()  # the user's modules the kernel's file imports: their saves count too

    def names() -> set[str]:
        return {str(file), str(file.resolve()), *(str(h) for h in helpers)}

    class OnSave(FileSystemEventHandler):
        def on_any_event(self, event: FileSystemEvent) -> None:
            paths = {str(event.src_path), str(getattr(event, "dest_path", "") or "")}
            if names() & paths and event.event_type in ("modified", "created", "moved", "closed", "deleted"):
                saved.set()

    observer = Observer()
    handler = OnSave()

    def follow() -> None:
        """Watch the folder of the file, of what it links to now and of the modules it imports."""
        if found := imported_user_files(file):  # what the last build's import imported (kept if it failed)
            helpers.clear()
            helpers.update(found)
        for folder in {str(file.parent), str(file.resolve().parent), *(str(h.parent) for h in helpers)} - watched:
            if Path(folder).is_dir():
                observer.schedule(handler, folder, recursive=False)
                watched.add(folder)

    missing = False
    saves = 0  # the saves compiled so far
    try:  # from here a stop signal (Ctrl-C, SIGTERM, SIGHUP) ends the watch as "stopped", exit 0
        follow()
        observer.start()
        # The address only once the observer watches: a save right after it appears is not missed.
        print(f"xpukit: watching {file}: http://{HOST}:{server.port}/ (Ctrl-C stops)", file=sys.stderr, flush=True)
        while True:
            saved.wait()
            time.sleep(_DEBOUNCE_S)
            saved.clear()
            follow()  # the file may be a link now, or link elsewhere; its imports may have changed
            if not _present(file):
                if not missing:
                    missing = True
                    said = f"{_absent(file)}; showing its last report until it is back"
                    state.publish(functools.partial(render_page, report, None, said, "missing"))
                    print(f"xpukit: watch: {said}", file=sys.stderr, flush=True)
                continue
            if missing:
                missing = False
                print(f"xpukit: watch: {file} is back; compiling it", file=sys.stderr, flush=True)
            started = time.monotonic()
            before = NATIVE_MEMORY.counts.copy()
            try:
                new = build(True)
            except XpukitError as exc:
                said = f"the last save did not compile: {exc.one_line()}; showing the last report that did"
                state.publish(functools.partial(render_page, report, None, said, "error"))
                print(f"xpukit: watch: {exc.one_line()}", file=sys.stderr, flush=True)
                continue
            failure = _did_not_compile(new)
            if failure:  # a mistake in the kernel: every cell failed, none has counts to show
                said = f"the last save did not compile: {failure}; showing the last report that did"
                state.publish(functools.partial(render_page, report, None, said, "error"))
                print(f"xpukit: watch: the last save did not compile: {failure}", file=sys.stderr, flush=True)
                continue
            took = time.monotonic() - started
            saves += 1
            if pinned is not None:
                compare_with_pinned(new, pinned)
            state.publish(functools.partial(render_page, new, report, _status(took, saves), "ok"))
            report = new
            print(
                f"xpukit: watch: save {saves} compiled in {took:.2f} s ({_builds(NATIVE_MEMORY.counts - before)})",
                file=sys.stderr,
                flush=True,
            )
    except KeyboardInterrupt:
        print("xpukit: watch: stopped", file=sys.stderr, flush=True)
        return 0
    finally:
        observer.stop()
        server.stop()
        if observer.is_alive():
            observer.join(timeout=2)
