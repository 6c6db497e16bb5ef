"""The HTTP side of ``kernel-report --watch``: a local server that a browser may talk to.

Plain Python (no Triton, no watchdog), so the host's tests start it in-process. What makes it safe
to run while the user browses other sites:

- It answers only ``Host: 127.0.0.1:PORT`` or ``localhost:PORT`` (421 otherwise, ``/events`` too): a
  page elsewhere that DNS-rebinds its own name to 127.0.0.1 gets nothing, not the kernel's source.
- A request must arrive whole within :data:`REQUEST_TIMEOUT_S`; a partial or trickling client is
  dropped then, so it cannot pin a thread. Only the ``/events`` stream outlives it, and ends when
  the server stops.
- A client that leaves mid-download (BrokenPipeError, ConnectionResetError) costs no traceback.
- The page's JSON escapes ``<`` (``report_format.script_json``), and the version the page's script
  waits on is a ``<meta>`` built with the page, never a text replace over the source in it.
"""

from __future__ import annotations

import contextlib
import html
import http.server
import socket
import sys
import threading
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from xpukit.errors import XpukitError
from xpukit.runtime.offline.line_view import line_changes
from xpukit.runtime.offline.report_format import format_html
from xpukit.runtime.offline.report_model import Report

HOST = "127.0.0.1"
REQUEST_TIMEOUT_S = 5.0  # a whole request, headers included, from a local browser takes milliseconds
IDLE_S = 15.0  # an /events comment this often keeps the stream open through idle time
LIFELINE_ENV = "XPUKIT_WATCH_LIFELINE"

_EVENTS_SCRIPT = """<noscript><meta http-equiv="refresh" content="3"></noscript>
<script>
(function () {
  "use strict";
  var version = Number(document.querySelector('meta[name="xpukit-version"]').content);
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

    def publish(self, render: Callable[[int], str]) -> int:
        """Make ``render(version)`` the page, as the next version; the event streams are told."""
        with self.changed:
            version = self.version + 1
            self.page = render(version)
            self.version = version
            self.changed.notify_all()
            return version

    def wait_newer(self, version: int, timeout: float) -> int:
        with self.changed:
            self.changed.wait_for(lambda: self.version != version or self.stopping, timeout)
            return self.version

    def stop(self) -> None:
        """End every event stream (the server is stopping)."""
        with self.changed:
            self.stopping = True
            self.changed.notify_all()


def render_page(report: Report, previous: Report | None, status: str, kind: str, version: int) -> str:
    """The ``--format html`` page with the watch's status line on top and, in its head, the version
    (as data: a number in a ``<meta>``) and the script that reloads on a newer one.
    ``kind``: ok, error (the last save did not compile) or missing (the file was deleted)."""
    head = (
        f'<meta name="xpukit-version" content="{int(version)}">\n'
        f'<meta name="xpukit-status" content="{html.escape(kind)}">\n{_EVENTS_SCRIPT}'
    )
    top = f'<p class="note" id="status">{html.escape(status)}</p>\n'
    return format_html(report, line_changes(previous, report), head=head, top=top)


def _client_left(exc: BaseException | None) -> bool:
    """A client that went away (or was dropped for being slow): nothing to report."""
    return isinstance(exc, (ConnectionError, TimeoutError))


class WatchServer(http.server.ThreadingHTTPServer):
    """One thread per request (daemon threads: none keeps the watch alive); see the module's doc."""

    daemon_threads = True

    def __init__(self, state: WatchState, port: int, request_timeout: float = REQUEST_TIMEOUT_S) -> None:
        self.state = state
        self.request_timeout = request_timeout
        super().__init__((HOST, port), _Handler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def handle_error(self, request: Any, client_address: Any) -> None:
        if _client_left(sys.exc_info()[1]):
            return
        super().handle_error(request, client_address)

    def stop(self) -> None:
        """End the event streams, stop serving and close the listening socket."""
        self.state.stop()
        self.shutdown()
        self.server_close()


class _Handler(http.server.BaseHTTPRequestHandler):
    server: WatchServer

    def setup(self) -> None:
        # Each read or write waits at most this long; the timer below bounds the whole request, so a
        # client sending one byte every few seconds is dropped too.
        super().setup()
        self.connection.settimeout(self.server.request_timeout)
        self._expired = False
        self._deadline = threading.Timer(self.server.request_timeout, self._drop)
        self._deadline.daemon = True
        self._deadline.start()

    def _drop(self) -> None:
        self._expired = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def finish(self) -> None:
        self._deadline.cancel()
        try:
            super().finish()
        except OSError as exc:
            if not _client_left(exc) and not self._expired:
                raise

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the terminal shows compiles, not requests (nor a timed-out one)

    def do_GET(self) -> None:
        if self._expired:
            return  # the request arrived whole only because the timer shut the socket
        port = self.server.port
        hosts = [h.strip().lower() for h in self.headers.get_all("Host") or []]  # exactly one (RFC 9112)
        if len(hosts) != 1 or hosts[0] not in (f"{HOST}:{port}", f"localhost:{port}"):
            # A DNS-rebinding page reaches 127.0.0.1 under its own name: give it nothing.
            self.send_error(HTTPStatus.MISDIRECTED_REQUEST, f"only Host: {HOST}:{port} or localhost:{port}")
            return
        path = self.path.partition("?")[0]
        if path == "/":
            self._send(HTTPStatus.OK, "text/html; charset=utf-8", self.server.state.page.encode())
        elif path == "/events":
            self._events()
        else:
            self.send_error(HTTPStatus.NOT_FOUND, "only / and /events are served")

    def _send(self, status: HTTPStatus, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _events(self) -> None:
        self._deadline.cancel()  # the stream is meant to stay open; it ends when the server stops
        state = self.server.state
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        seen = -1
        while not state.stopping:
            version = state.wait_newer(seen, IDLE_S)
            if state.stopping:
                break
            message = f"event: report\ndata: {version}\n\n" if version != seen else ": idle\n\n"
            self.wfile.write(message.encode())  # a page gone away raises here: handle_error is quiet
            self.wfile.flush()
            seen = version


def start_server(state: WatchState, port: int = 0, request_timeout: float = REQUEST_TIMEOUT_S) -> WatchServer:
    """Listen on 127.0.0.1:PORT (0: a free port) and serve in a background thread."""
    try:
        server = WatchServer(state, port, request_timeout)
    except OSError as exc:
        raise XpukitError(
            f"cannot listen on {HOST}:{port}: {exc.strerror}", "pass another --port, or 0 for a free one"
        ) from None
    threading.Thread(target=server.serve_forever, name="xpukit-watch-http", daemon=True).start()
    return server


def follow_lifeline(address: str, on_lost: Callable[[], None]) -> None:
    """Connect to ``HOST:PORT``, where the invoke that started this watch listens, and call
    ``on_lost`` from a background thread when that connection ends: the kernel closes it when the
    invoke dies, even by SIGKILL, so the watch (and its container) never outlives it."""
    host, _, port = address.rpartition(":")
    try:
        conn = socket.create_connection((host, int(port)), timeout=REQUEST_TIMEOUT_S)
    except (OSError, ValueError):
        raise XpukitError(
            f"{LIFELINE_ENV}={address}: nothing listens there (the invoke that started this watch is gone)",
            f"start the watch again with invoke kernel-report --watch, or unset {LIFELINE_ENV}",
        ) from None
    conn.settimeout(None)

    def wait() -> None:
        with conn, contextlib.suppress(OSError):
            while conn.recv(1024):
                pass  # nothing is sent; anything that is changes nothing
        on_lost()

    threading.Thread(target=wait, name="xpukit-watch-lifeline", daemon=True).start()
