"""`python -m xpukit kernel-report --watch` in the image, as `invoke kernel-report --watch` runs it:
a deleted kernel file is reported (terminal and page) and picked up again when it is back; SIGTERM,
SIGHUP and the end of the invoke that started it (its lifeline) stop it as Ctrl-C does.

Needs ocloc 26.27 and Triton: the image. The server's own behaviour (Host, timeouts, clients that
leave) is tests/host/test_watch_server.py's; through invoke and the engine, tests/engine/test_kernel_watch.py's.
"""

from __future__ import annotations

import http.client
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from tests.support import ROOT
from tests.support.families import current_ocloc_or_skip

KERNELS = ROOT / "examples" / "kernels.py"


@pytest.fixture(scope="module")
def triton_cache(tmp_path_factory):
    pytest.importorskip("triton")
    pytest.importorskip("watchdog")
    current_ocloc_or_skip()
    return tmp_path_factory.mktemp("triton-cache")


class Watch:
    """The watch as a process, its stderr read line by line in a thread."""

    def __init__(
        self, kernel, cache, env: dict[str, str] | None = None, port: int = 0, wait: bool = True,
        name: str = "row_sum_kernel",
    ) -> None:  # fmt: skip
        cmd = [sys.executable, "-m", "xpukit", "kernel-report", f"{kernel}:{name}", "--target", "pvc",
               "--watch", "--port", str(port)]  # fmt: skip
        full = {**os.environ, "TRITON_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT), **(env or {})}
        self.proc = subprocess.Popen(cmd, cwd=kernel.parent, env=full, stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        if wait:
            self.port = int(self.wait_for(r"http://127\.0\.0\.1:(\d+)/", 600).group(1))

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line)
        self.lines.put("")

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str]:
        """The first stderr line from now on matching ``pattern``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            self.seen.append(line)
            if match := re.search(pattern, line):
                return match
            if not line:
                break
        raise AssertionError(f"no line matching {pattern!r}; stderr: {''.join(self.seen)[-2000:]}")

    def page(self) -> str:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("GET", "/", headers={"Host": f"127.0.0.1:{self.port}"})
            response = conn.getresponse()
            assert response.status == 200
            return response.read().decode()
        finally:
            conn.close()

    def end(self, timeout: float = 60) -> str:
        """Its exit, and all of its stderr."""
        try:
            self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        rest = []
        while (line := self.lines.get(timeout=10)) != "":
            rest.append(line)
        return "".join(self.seen + rest)


def _copy(tmp_path):
    work = tmp_path / "kernels"
    work.mkdir()
    kernel = work / "kernels.py"
    shutil.copy(KERNELS, kernel)
    return kernel


@pytest.mark.container
def test_a_deleted_file_is_reported_and_picked_up_again(triton_cache, tmp_path):
    """Deleting the watched file: one terminal line, the page says so (status "missing") and keeps
    the last report; the file back (edited): compiled again, the page shows the new line. SIGTERM
    then stops the watch as Ctrl-C does."""
    kernel = _copy(tmp_path)
    source = kernel.read_text()
    watch = Watch(kernel, triton_cache)
    try:
        assert '<meta name="xpukit-status" content="ok">' in watch.page()
        kernel.unlink()
        watch.wait_for(rf"xpukit: watch: {re.escape(str(kernel))} was deleted", 30)
        page = watch.page()
        assert '<meta name="xpukit-status" content="missing">' in page and "was deleted" in page
        assert "tl.sum(x, axis=0)" in page  # the last report stays
        edited = source.replace("    tl.store(out_ptr + row, tl.sum(x, axis=0))",
                                "    x = x * 2.0\n    tl.store(out_ptr + row, tl.sum(x, axis=0))")  # fmt: skip
        assert edited != source
        kernel.write_text(edited)
        watch.wait_for(rf"xpukit: watch: {re.escape(str(kernel))} is back", 30)
        watch.wait_for(r"xpukit: watch: save 1 compiled in", 300)
        page = watch.page()
        assert '<meta name="xpukit-status" content="ok">' in page and "x = x * 2.0" in page
        watch.proc.send_signal(signal.SIGTERM)
    finally:
        err = watch.end()
    assert watch.proc.returncode == 0 and "xpukit: watch: stopped" in err, err[-2000:]
    assert "Traceback" not in err and err.count("was deleted") == 1


@pytest.mark.container
@pytest.mark.parametrize("how", ["SIGHUP", "lifeline"])
def test_a_closed_terminal_or_a_gone_invoke_stops_the_watch(triton_cache, tmp_path, how):
    """SIGHUP (the terminal closed), or the invoke that started the watch gone (the socket it
    listened on closed, as a SIGKILL closes it): the watch stops as Ctrl-C stops it, exit 0, and
    nothing listens on its port."""
    kernel = _copy(tmp_path)
    listener = socket.create_server(("127.0.0.1", 0))
    env = {"XPUKIT_WATCH_LIFELINE": f"127.0.0.1:{listener.getsockname()[1]}"}
    watch = Watch(kernel, triton_cache, env)
    try:
        if how == "SIGHUP":
            watch.proc.send_signal(signal.SIGHUP)
        else:
            listener.close()
        err = watch.end(timeout=30)
    finally:
        listener.close()
    assert watch.proc.returncode == 0 and "xpukit: watch: stopped" in err, err[-2000:]
    assert "Traceback" not in err
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", watch.port)) != 0


_ROW_SUM_STORE = "    tl.store(out_ptr + row, tl.sum(x, axis=0))"


@pytest.mark.container
def test_a_save_that_does_not_compile_is_said_and_the_last_report_kept(triton_cache, tmp_path):
    """A save with a mistake in the kernel (a name never defined): the terminal says that save did
    not compile, whole, with the file's line; the page says so (status "error") over the last report
    that compiled, never "save 1 compiled" over a table of failed cells. The mistake fixed: compiled."""
    kernel = _copy(tmp_path)
    source = kernel.read_text()
    watch = Watch(kernel, triton_cache)
    try:
        kernel.write_text(source.replace(_ROW_SUM_STORE, _ROW_SUM_STORE.replace("axis=0))", "axis=0) + oops)")))
        said = watch.wait_for(r"xpukit: watch: .*", 300).group(0)
        line = source.splitlines().index(_ROW_SUM_STORE) + 1
        assert "did not compile" in said and f"kernels.py:{line}:" in said and "oops is not defined" in said, said
        page = watch.page()
        assert '<meta name="xpukit-status" content="error">' in page and "oops is not defined" in page
        assert "showing the last report that did" in page
        kernel.write_text(source.replace(_ROW_SUM_STORE, "    x = x * 2.0\n" + _ROW_SUM_STORE))
        watch.wait_for(r"xpukit: watch: save 1 compiled in", 300)
        assert '<meta name="xpukit-status" content="ok">' in watch.page()
        watch.proc.send_signal(signal.SIGTERM)
    finally:
        err = watch.end()
    assert watch.proc.returncode == 0 and "Traceback" not in err, err[-2000:]


@pytest.mark.container
def test_a_port_in_use_is_said_before_the_first_compile(triton_cache, tmp_path):
    """--port of a port something listens on: one line naming it, before the kernel is compiled
    (a first compile of every family takes minutes cold; the kernel here takes 120 s to import)."""
    kernel = _copy(tmp_path)
    kernel.write_text("import time\ntime.sleep(120)\n" + kernel.read_text())
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        watch = Watch(kernel, triton_cache, port=port, wait=False)
        err = watch.end(timeout=60)
    assert watch.proc.returncode == 1 and "Traceback" not in err, err[-2000:]
    assert f"xpukit: error: cannot listen on 127.0.0.1:{port}: Address already in use" in err, err


@pytest.mark.container
def test_a_file_replaced_by_a_symlink_is_followed(triton_cache, tmp_path):
    """The watched file replaced by a link to another file (a checkout switching a kernel, a
    dotfiles-style setup): the link's target is compiled, and a save of the target is a save of the
    watched file. Replaced by a folder: said as such, not as a deletion."""
    kernel = _copy(tmp_path)
    source = kernel.read_text()
    watch = Watch(kernel, triton_cache)
    try:
        target = tmp_path / "elsewhere" / "real_kernels.py"
        target.parent.mkdir()
        target.write_text(source.replace(_ROW_SUM_STORE, "    x = x * 3.0\n" + _ROW_SUM_STORE))
        link = kernel.with_name("link.tmp")
        link.symlink_to(target)
        link.replace(kernel)  # an atomic swap, as an editor or git does
        watch.wait_for(r"xpukit: watch: save 1 compiled in", 300)
        assert "x = x * 3.0" in watch.page()
        target.write_text(source.replace(_ROW_SUM_STORE, "    x = x * 4.0\n" + _ROW_SUM_STORE))
        watch.wait_for(r"xpukit: watch: save 2 compiled in", 300)
        assert "x = x * 4.0" in watch.page()
        kernel.unlink()
        kernel.mkdir()
        said = watch.wait_for(r"xpukit: watch: .*", 30).group(0)
        assert "is a folder now" in said, said
        watch.proc.send_signal(signal.SIGTERM)
    finally:
        err = watch.end()
    assert watch.proc.returncode == 0 and "Traceback" not in err, err[-2000:]


@pytest.mark.container
def test_a_save_of_a_helper_the_kernel_imports_is_compiled(triton_cache, tmp_path):
    """The kernel's file imports a @triton.jit helper from the user's own module: a save of that
    module is a save too, and the new compile is the helper as saved (both files imported again)."""
    from tests.image.test_specialization import HELPER, USES_HELPER

    work = tmp_path / "kernels"
    work.mkdir()
    (work / "helper_mod.py").write_text(HELPER)
    kernel = work / "uses_helper.py"
    kernel.write_text(USES_HELPER)
    watch = Watch(kernel, triton_cache, name="k")
    try:
        assert "0.5:f" not in watch.page()
        (work / "helper_mod.py").write_text(HELPER.replace("return x * 2.0", "return x * 2.0 + 0.5"))
        watch.wait_for(r"xpukit: watch: save 1 compiled in", 300)
        assert "0.5:f" in watch.page()  # the ISA of the helper as saved
        watch.proc.send_signal(signal.SIGTERM)
    finally:
        err = watch.end()
    assert watch.proc.returncode == 0 and "Traceback" not in err, err[-2000:]
