"""``kernel-report --watch``: the per-line view on http://127.0.0.1:PORT/, compiled again on each save.

watchdog reports the kernel's file changing (editors save in place or by rename; both count); the
report is built again in this process (Triton already imported: the warm path), and the page is told
over Server-Sent Events to reload. The page is the ``--format html`` page itself: source and counts
in its HTML, script only for switching families and for the reload; without script it refreshes
itself every few seconds. Only ``/`` and ``/events`` are served, on 127.0.0.1 only.
"""

from __future__ import annotations

import html
import http.server
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from http import HTTPStatus
from pathlib import Path
from typing import Any

from xpukit.errors import UsageError, XpukitError
from xpukit.runtime.kernels.compile import NATIVE_MEMORY
from xpukit.runtime.kernels.kernel_report import build_report
from xpukit.runtime.offline.line_view import line_changes
from xpukit.runtime.offline.report_format import format_html

HOST = "127.0.0.1"
_DEBOUNCE_S = 0.05  # an editor's save is several events (write, rename, chmod) in a few ms
_EVENTS_SCRIPT = """<noscript><meta http-equiv="refresh" content="3"></noscript>
<script>
(function () {
  "use strict";
  var version = __VERSION__;
  var events = new EventSource("/events?since=" + version);
  events.addEventListener("report", function (e) { if (Number(e.data) !== version) { location.reload(); } });
})();
</script>"""


class WatchState:
    """The page's current version, its HTML, and a condition the event streams wait on."""

    def __init__(self) -> None:
        self.version = 0
        self.page = "<!DOCTYPE html><title>kernel-report</title><p>compiling...</p>"
        self.changed = threading.Condition()
        self.stopping = False

    def publish(self, page: str) -> None:
        with self.changed:
            self.version += 1
            self.page = page.replace("__VERSION__", str(self.version))
            self.changed.notify_all()

    def wait_newer(self, version: int, timeout: float) -> int:
        with self.changed:
            self.changed.wait_for(lambda: self.version != version or self.stopping, timeout)
            return self.version


def _handler(state: WatchState) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass  # the terminal shows compiles, not requests

        def do_GET(self) -> None:
            path = self.path.partition("?")[0]
            if path == "/":
                body = state.page.encode()
                self.send_response(HTTPStatus.OK)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Cache-Control", "no-store")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            elif path == "/events":
                self._events()
            else:
                self.send_error(HTTPStatus.NOT_FOUND, "only / and /events are served")

        def _events(self) -> None:
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            seen = -1
            try:
                while not state.stopping:
                    version = state.wait_newer(seen, 15.0)
                    # a comment line every 15 s keeps the stream open through idle time
                    message = f"event: report\ndata: {version}\n\n" if version != seen else ": idle\n\n"
                    self.wfile.write(message.encode())
                    self.wfile.flush()
                    seen = version
            except OSError:
                pass  # the page went away

    return Handler


def _page(report: dict[str, Any], previous: dict[str, Any] | None, error: str | None, took: float) -> str:
    status = f"compiled in {took:.1f} s at {time.strftime('%H:%M:%S')}"
    if error:
        status = f"the last save did not compile: {error}; showing the last report that did"
    head = f'{_EVENTS_SCRIPT}\n<meta name="xpukit-status" content="{"error" if error else "ok"}">'
    page = format_html(report, line_changes(previous, report), head=head)
    return page.replace("<body>", f'<body>\n<p class="note" id="status">{html.escape(status)}</p>', 1)


def _builds(counts: Counter[str]) -> str:
    """ "ocloc: 5 built, 2 reused, speculation used 1" for the terminal."""
    parts = [f"{counts[k]} {k}" for k in ("built", "reused") if counts[k]]
    parts += [f"{k}: {counts[k]}" for k in sorted(counts) if k.startswith("speculation")]
    return "ocloc: " + (", ".join(parts) or "nothing to build")


def watch_report(
    kernel: str,
    targets: Sequence[str],
    configs: Sequence[str],
    signature: str | None,
    constexprs: Sequence[str],
    port: int = 0,
) -> int:
    """Serve the per-line report and rebuild it on every save of the kernel's file until Ctrl-C."""
    from watchdog.events import FileSystemEvent, FileSystemEventHandler
    from watchdog.observers import Observer

    file = Path(kernel.rpartition(":")[0]).expanduser().resolve()
    if not file.is_file():
        raise UsageError(f"kernel file {file} not found", "give the path to a .py file")
    state = WatchState()

    def build(fresh: bool) -> dict[str, Any]:
        return build_report(kernel, targets, configs, signature, constexprs, lines=True, fresh=fresh)

    started = time.monotonic()
    report = build(False)  # a first compile error is the user's to fix before watching
    state.publish(_page(report, None, None, time.monotonic() - started))
    try:
        server = http.server.ThreadingHTTPServer((HOST, port), _handler(state))
    except OSError as exc:
        raise XpukitError(
            f"cannot listen on {HOST}:{port}: {exc.strerror}", "pass another --port, or 0 for a free one"
        ) from None
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="xpukit-watch-http", daemon=True).start()

    saved = threading.Event()

    class OnSave(FileSystemEventHandler):
        def on_any_event(self, event: FileSystemEvent) -> None:
            paths = {str(event.src_path), str(getattr(event, "dest_path", "") or "")}
            if str(file) in paths and event.event_type in ("modified", "created", "moved", "closed"):
                saved.set()

    def stop(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt  # `docker stop` and the host's Ctrl-C end the watch like Ctrl-C here

    signal.signal(signal.SIGTERM, stop)
    observer = Observer()
    observer.schedule(OnSave(), str(file.parent), recursive=False)
    observer.start()
    # The address only once the observer watches: a save right after it appears is not missed.
    print(
        f"xpukit: watching {file}: http://{HOST}:{server.server_address[1]}/ (Ctrl-C stops)",
        file=sys.stderr,
        flush=True,
    )
    try:
        while True:
            saved.wait()
            time.sleep(_DEBOUNCE_S)
            saved.clear()
            started = time.monotonic()
            before = NATIVE_MEMORY.counts.copy()
            try:
                new = build(True)
            except XpukitError as exc:
                state.publish(_page(report, None, exc.one_line(), 0.0))
                print(f"xpukit: watch: {exc.one_line()}", file=sys.stderr, flush=True)
                continue
            took = time.monotonic() - started
            state.publish(_page(new, report, None, took))
            report = new
            print(
                f"xpukit: watch: compiled in {took:.2f} s ({_builds(NATIVE_MEMORY.counts - before)})",
                file=sys.stderr,
                flush=True,
            )
    except KeyboardInterrupt:
        print("xpukit: watch: stopped", file=sys.stderr, flush=True)
        return 0
    finally:
        state.stopping = True
        with state.changed:
            state.changed.notify_all()
        observer.stop()
        server.shutdown()
        server.server_close()
        observer.join(timeout=2)
