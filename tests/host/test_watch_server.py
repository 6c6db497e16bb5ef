"""`kernel-report --watch`'s server (xpukit/runtime/kernels/watch_server.py), started for real in this
process on 127.0.0.1 and talked to over real sockets: what a browser, a DNS-rebinding page, a slow
client and a client that leaves mid-download each get. The watch itself (Triton, watchdog) is
tests/image/test_watch_file.py's and tests/engine/test_kernel_watch.py's."""

from __future__ import annotations

import http.client
import json
import re
import socket
import struct
import threading
import time
from html.parser import HTMLParser

import pytest

from tests.support.reports import as_report
from xpukit.runtime.kernels.watch_server import WatchState, follow_lifeline, render_page, start_server
from xpukit.runtime.offline import isa
from xpukit.runtime.offline.report_model import Report
from xpukit.targets import occupancy

pytestmark = pytest.mark.unit

TIMEOUT = 1.0  # the servers here drop an incomplete request after 1 s (the watch's: 5 s)
SOURCE = [
    "@triton.jit",
    "def k(x):",
    "    a = tl.load(x)  # <!--<script> __VERSION__ </script><b id=injected>",
    "    tl.store(x, a)  # __DATA__ & __TOP__",
]


def _counts(instr: int) -> dict:
    sends = dict.fromkeys(isa.SEND_KINDS, 0)
    sends["global_load"] = 1
    return isa.IsaCounts(instr, sends, dpas=0, math=0, moves=0, control_flow=0, barriers=0).to_dict()


def _report(first: int = 10) -> Report:
    """A --lines report of SOURCE on pvc, every line carrying some instructions."""
    entries = [{"file": "/k.py", "line": first + i, "source": text, "counts": _counts(i + 1), "via": [],
                "asm": [[16 * i, f"add (1|M0) r{i}"]]} for i, text in enumerate(SOURCE)]  # fmt: skip
    row = {"target": "pvc", "config": "declared", "error": None, "counts": _counts(10), "simd": 16, "grf": 128,
           "grf_mode": "default", "scratch_bytes": 0, "private_bytes": 0, "slm_bytes": 0, "work_group": 64,
           "lines": entries, "line_info": "", "limits": [], "grf_rule": "no spills",
           "spills": {"bytes_per_thread": 0, "n_spills": 0}, "occupancy": occupancy("pvc", 16, 128, 64)}  # fmt: skip
    kernel_source = {"file": "/k.py", "first": first, "lines": SOURCE, "sha256": "0"}
    return as_report({"kernel": "k", "ocloc": "ocloc", "targets": ["pvc"], "configs": [{"label": "declared"}],
                      "rows": [row], "lines": True, "kernel_source": kernel_source})  # fmt: skip


@pytest.fixture
def server():
    state = WatchState()
    state.publish(lambda version: render_page(_report(), None, "compiled", "ok", version))
    running = start_server(state, 0, request_timeout=TIMEOUT)
    yield running
    running.stop()


def _get(port: int, path: str, host: str | None, timeout: float = 10) -> tuple[int, dict[str, str], bytes]:
    """GET with exactly the Host header given (None: none at all)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.putrequest("GET", path, skip_host=True)
        if host is not None:
            conn.putheader("Host", host)
        conn.endheaders()
        response = conn.getresponse()
        body = response.read() if path != "/events" or response.status != 200 else response.read1(64)
        return response.status, dict(response.getheaders()), body
    finally:
        conn.close()


def test_only_a_local_host_header_is_answered(server):
    """127.0.0.1:PORT and localhost:PORT get the page and the event stream; any other name (a page
    that DNS-rebound its own name to 127.0.0.1), another port, or no Host at all gets 421 and no byte
    of the page, on / and /events alike."""
    port = server.port
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LocalHost:{port}"):
        status, headers, body = _get(port, "/", host)
        assert status == 200 and "a = tl.load(x)" in body.decode(), host
        assert headers["Cache-Control"] == "no-store"
        status, _, body = _get(port, "/events", host)
        assert status == 200 and body.startswith(b"event: report\ndata: 1"), host
    for host in ("attacker.example", f"attacker.example:{port}", "127.0.0.1", f"127.0.0.1:{port + 1}",
                 f"localhost.attacker.example:{port}", None):  # fmt: skip
        for path in ("/", "/events"):
            status, _, body = _get(port, path, host)
            assert status == 421, (host, path)
            assert b"tl.load" not in body and b"event:" not in body


def test_two_host_headers_are_refused(server):
    """Two Host lines, the local one first or last: 421 (RFC 9112 refuses such a request; a proxy
    or a client may read the other one), no byte of the page."""
    port = server.port
    for hosts in ((f"127.0.0.1:{port}", "attacker.example"), ("attacker.example", f"127.0.0.1:{port}")):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
            lines = "".join(f"Host: {h}\r\n" for h in hosts)
            client.sendall(f"GET / HTTP/1.1\r\n{lines}\r\n".encode())
            answer = b""
            while chunk := client.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.0 421 ") and b"tl.load" not in answer, (hosts, answer[:80])


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes the connection within ``seconds`` (reads until EOF)."""
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True


def test_a_partial_request_pins_no_thread_and_is_dropped(server):
    """A client that sends half a request, and one that trickles a byte at a time, hold the server
    up for nobody: a whole request is answered meanwhile, and both are dropped once the request
    timeout has passed, whatever the trickle."""
    port = server.port
    partial = socket.create_connection(("127.0.0.1", port))
    partial.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode())  # no blank line: never ends
    trickle = socket.create_connection(("127.0.0.1", port))
    stop = threading.Event()

    def drip() -> None:
        for byte in f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ".encode() + b"a" * 1000:
            if stop.wait(0.2):
                return
            try:
                trickle.send(bytes([byte]))
            except OSError:
                return

    dripping = threading.Thread(target=drip, daemon=True)
    dripping.start()
    try:
        started = time.monotonic()
        status, _, _ = _get(port, "/", f"127.0.0.1:{port}", timeout=TIMEOUT / 2)
        assert status == 200 and time.monotonic() - started < TIMEOUT / 2
        assert _closed_within(partial, TIMEOUT + 2)
        assert _closed_within(trickle, 2)  # 0.2 s a byte never times out one read: the deadline ends it
        assert time.monotonic() - started < TIMEOUT + 3
    finally:
        stop.set()
        dripping.join()
        partial.close()
        trickle.close()
    assert _get(port, "/", f"127.0.0.1:{port}")[0] == 200


def _handler_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if "process_request" in t.name]


@pytest.mark.parametrize("how", ["reset", "close"])
def test_a_client_leaving_mid_download_prints_nothing(capfd, how):
    """A page far larger than the socket buffers; the client reads a little and leaves (a reset, or a
    close with unread data): the server's write fails (BrokenPipeError or ConnectionResetError) and
    nothing at all reaches stderr. The server goes on answering."""
    state = WatchState()
    big = "<!DOCTYPE html><title>big</title><pre>" + "x" * (32 << 20) + "</pre>"
    state.publish(lambda _version: big)
    running = start_server(state, 0, request_timeout=30)
    try:
        for _ in range(3):
            client = socket.create_connection(("127.0.0.1", running.port))
            client.sendall(f"GET / HTTP/1.0\r\nHost: 127.0.0.1:{running.port}\r\n\r\n".encode())
            assert client.recv(4096).startswith(b"HTTP/1.0 200")
            if how == "reset":
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            client.close()
        deadline = time.monotonic() + 20
        while _handler_threads() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _handler_threads(), "the handler threads are still writing"
        conn = http.client.HTTPConnection("127.0.0.1", running.port, timeout=30)
        conn.request("GET", "/")
        assert conn.getresponse().read() == big.encode()
        conn.close()
    finally:
        running.stop()
    assert capfd.readouterr().err == ""


class _Scripts(HTMLParser):
    """Each <script> element's text, as the HTML parser splits the page (json ones by id)."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._open: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self._open = dict(attrs)
            self.scripts.append((self._open, ""))

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._open = None


def test_source_with_markup_and_placeholders_is_served_intact(server):
    """The kernel's source holds `<!--<script>`, `</script>`, `__VERSION__` and the page's own
    placeholder names: the embedded JSON has no `<` at all (so nothing in it can end the script or
    switch the parser into its escaped states), it reads back to the very source, the version is
    the state's number in a <meta> and the source's `__VERSION__` stays as written."""
    port = server.port
    status, _, body = _get(port, "/", f"127.0.0.1:{port}")
    page = body.decode()
    assert status == 200
    assert '<meta name="xpukit-version" content="1">' in page
    assert "&lt;!--&lt;script&gt; __VERSION__ &lt;/script&gt;&lt;b id=injected&gt;" in page  # the HTML view
    assert "__DATA__ &amp; __TOP__" in page and 'id="injected"' not in page and "<b id=injected>" not in page
    parser = _Scripts()
    parser.feed(page)
    data = next(text for attrs, text in parser.scripts if attrs.get("id") == "report-data")
    assert "<" not in data and ">" not in data and "&" not in data
    assert json.loads(data)["kernel_source"]["lines"] == SOURCE
    assert server.state.publish(lambda version: render_page(_report(), None, "again", "ok", version)) == 2
    assert '<meta name="xpukit-version" content="2">' in _get(port, "/", f"localhost:{port}")[2].decode()


def test_the_page_with_markup_in_its_source_runs_in_chromium(server, tmp_path):
    """The served page in headless chromium: its scripts parse and run (the grid is drawn, the
    family switch works, the reload script reads the version and opens /events), and the source
    line with `<!--<script>` and `__VERSION__` reads as written."""
    from tests.support.browser import Browser

    browser = Browser(tmp_path / "profile")
    try:
        browser.open(f"http://127.0.0.1:{server.port}/")
        browser.wait_for("document.body && document.body.dataset.rendered === '1'", 60)
        text = browser.evaluate("document.body.innerText")
        assert SOURCE[2].strip() in text and SOURCE[3].strip() in text
        assert browser.evaluate("document.getElementById('injected')") is None
        shown = browser.evaluate(
            "[...document.querySelectorAll('section[data-family]')].filter(s => !s.hidden).map(s => s.dataset.family)"
        )
        assert shown == ["pvc"]
        parsed = browser.evaluate("JSON.parse(document.getElementById('report-data').textContent).kernel_source.lines")
        assert parsed == SOURCE
        assert browser.evaluate("document.querySelector('meta[name=\"xpukit-version\"]').content") == "1"
        # a new version reloads the page (the events script parsed, read the version and listens)
        server.state.publish(lambda version: render_page(_report(), None, "second save", "ok", version))
        browser.wait_for("document.getElementById('status').textContent === 'second save'", 30)
    finally:
        browser.close()


def test_the_event_stream_ends_when_the_server_stops():
    """An open /events stream is not a thread left behind: stopping the server ends it."""
    state = WatchState()
    state.publish(lambda _version: "page")
    running = start_server(state, 0, request_timeout=TIMEOUT)
    conn = http.client.HTTPConnection("127.0.0.1", running.port, timeout=10)
    conn.request("GET", "/events", headers={"Host": f"127.0.0.1:{running.port}"})
    response = conn.getresponse()
    assert response.read1(64).startswith(b"event: report")
    time.sleep(TIMEOUT + 0.5)  # past the request timeout: the stream is exempt from it
    assert _handler_threads(), "the stream ended by itself"
    running.stop()
    assert response.read() == b""  # the server closed the stream
    deadline = time.monotonic() + 5
    while _handler_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _handler_threads()
    conn.close()


def test_the_lifeline_calls_back_when_its_listener_goes():
    """follow_lifeline: the listening end closing (its process killed) ends the watch; a lifeline
    whose listener is gone already is one line naming the variable."""
    from xpukit.errors import XpukitError

    listener = socket.create_server(("127.0.0.1", 0))
    lost = threading.Event()
    follow_lifeline(f"127.0.0.1:{listener.getsockname()[1]}", lost.set)
    assert not lost.wait(0.5)
    listener.close()  # never accepted: the kernel resets the queued connection, as when the process dies
    assert lost.wait(5)
    with pytest.raises(XpukitError, match=re.escape("XPUKIT_WATCH_LIFELINE=127.0.0.1:1: nothing listens there")):
        follow_lifeline("127.0.0.1:1", lost.set)
