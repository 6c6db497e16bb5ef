"""`invoke kernel-report --lines --format html` and `--watch` in headless chromium, through the
real engine and image: the per-line view reads without script, and the live page follows a save."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.support import ROOT
from tests.support.browser import Browser


def _env(tmp_path) -> dict[str, str]:
    env = {**os.environ, "XPUKIT_PROFILE": "", "XPUKIT_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("CI", None)
    return env


@pytest.mark.docker
def test_lines_html_reads_with_and_without_script(test_image, tmp_path):
    """The page's HTML carries the source and the per-line counts (chromium with script off shows
    them); with script, the family buttons switch which family's table shows."""
    args = ["kernel-report", "examples/kernels.py:row_sum_kernel", "--target", "pvc,acm-g10", "--lines"]
    run = subprocess.run([sys.executable, "-m", "invoke", *args, "--format", "html"], cwd=ROOT, env=_env(tmp_path),
                         capture_output=True, text=True, timeout=900, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    page = tmp_path / "lines.html"
    page.write_text(run.stdout)
    browser = Browser(tmp_path / "profile")
    try:
        browser.open(page.as_uri())
        text = browser.wait_for("document.readyState === 'complete' && document.body.innerText", 60)
        assert "tl.store(out_ptr + row, tl.sum(x, axis=0))" in text and "standard.py:" in text
        shown = browser.evaluate(
            "[...document.querySelectorAll('section[data-family]')].filter(s => !s.hidden).map(s => s.dataset.family)"
        )
        assert shown == ["pvc"]
        browser.evaluate("document.querySelector('button[data-family=\"acm-g10\"]').click()")
        shown = browser.evaluate(
            "[...document.querySelectorAll('section[data-family]')].filter(s => !s.hidden).map(s => s.dataset.family)"
        )
        assert shown == ["acm-g10"]
    finally:
        browser.close()
    no_script = Browser(tmp_path / "profile-no-script")
    try:
        no_script.open("about:blank")
        no_script.call("Emulation.setScriptExecutionDisabled", {"value": True}, no_script.session)
        no_script.call("Page.navigate", {"url": page.as_uri()}, no_script.session)
        time.sleep(2)
        html = no_script.call(
            "DOM.getOuterHTML",
            {"nodeId": no_script.call("DOM.getDocument", {}, no_script.session)["root"]["nodeId"]},
            no_script.session,
        )["outerHTML"]
        assert "tl.sum(x, axis=0)" in html and "<details>" in html
        assert "data-rendered" not in html.split("<body")[1].split(">")[0]  # the grid's script did not run
    finally:
        no_script.close()


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.docker
def test_watch_page_follows_a_save_and_ctrl_c_stops_it(test_image, docker_client, tmp_path):
    """`--watch` prints http://127.0.0.1:PORT/; the page shows the kernel by line; saving an edit
    makes the page show the new line marked "edited"; only / and /events are served; Ctrl-C ends
    the task as every task's Ctrl-C does ("xpukit: interrupted", exit 130), no traceback, no
    container left, nothing listening on the port."""
    work = tmp_path / "kernels"
    work.mkdir()
    kernel = work / "kernels.py"
    shutil.copy(ROOT / "examples" / "kernels.py", kernel)
    proc = subprocess.Popen(
        [sys.executable, "-m", "invoke", "kernel-report", f"{kernel}:row_sum_kernel", "--target", "pvc", "--watch"],
        cwd=ROOT, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    browser = None
    try:
        url = None
        seen = []
        deadline = time.monotonic() + 600
        assert proc.stdout is not None  # the container's output, stderr included, arrives here
        while url is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            if match := re.search(r"http://127\.0\.0\.1:(\d+)/", line):
                url = match.group(0)
        assert url, "".join(seen)[-2000:]
        import urllib.error
        import urllib.request

        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(url + "etc/passwd", timeout=10)
        assert info.value.code == 404
        browser = Browser(tmp_path / "profile")
        browser.open(url)
        browser.wait_for("document.body && document.body.innerText.includes('tl.sum(x, axis=0)')", 60)
        first = browser.evaluate("document.getElementById('status').textContent")
        source = kernel.read_text()
        edited = source.replace("    tl.store(out_ptr + row, tl.sum(x, axis=0))",
                                "    x = x * 2.0\n    tl.store(out_ptr + row, tl.sum(x, axis=0))")  # fmt: skip
        assert edited != source
        kernel.write_text(edited)
        browser.wait_for("document.body.innerText.includes('x = x * 2.0')", 120)
        change = browser.evaluate(
            "[...document.querySelectorAll('tr')].filter(r => r.innerText.includes('x = x * 2.0'))"
            ".map(r => r.querySelector('td.change') ? r.querySelector('td.change').textContent : '').join('|')"
        )
        assert "edited" in change
        assert browser.evaluate("document.getElementById('status').textContent") != first
    finally:
        if browser is not None:
            browser.close()
        os.killpg(proc.pid, signal.SIGINT)
        try:
            err, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            err, _ = proc.communicate()
    assert proc.returncode == 130 and "xpukit: interrupted" in err, err[-2000:]
    port = int(url.rsplit(":", 1)[1].strip("/"))
    assert not _listening(port)
    assert "Traceback" not in err
    left = [c for c in docker_client.containers.list() if str(kernel) in " ".join(c.attrs["Args"] or [])]
    assert not left, "the watch's container is still running"


def _start_watch(tmp_path):
    """`invoke kernel-report --watch` on a copy of examples/kernels.py, in its own session; the
    process and the port once the watch prints its address."""
    work = tmp_path / "kernels"
    work.mkdir()
    kernel = work / "kernels.py"
    shutil.copy(ROOT / "examples" / "kernels.py", kernel)
    proc = subprocess.Popen(
        [sys.executable, "-m", "invoke", "kernel-report", f"{kernel}:row_sum_kernel", "--target", "pvc", "--watch"],
        cwd=ROOT, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    assert proc.stdout is not None
    seen = []
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if match := re.search(r"http://127\.0\.0\.1:(\d+)/", line):
            return proc, int(match.group(1))
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    raise AssertionError("".join(seen)[-2000:])


def _watch_containers(docker_client, pid: int, running_only: bool = True) -> list:
    """The watch containers the invoke with this pid started (their label names it)."""
    from xpukit.host.run.containers import WATCH_LABEL

    found = docker_client.containers.list(all=not running_only, filters={"label": WATCH_LABEL})
    return [c for c in found if c.labels[WATCH_LABEL].split(":")[1] == str(pid)]


@pytest.mark.docker
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_or_sighup_of_the_invoke_leaves_no_container(test_image, docker_client, tmp_path, signum):
    """SIGTERM (a process manager) or SIGHUP (the terminal closed) sent to invoke alone, not to its
    session: it ends as Ctrl-C does (exit 130, "xpukit: interrupted", no traceback), and its labelled
    container is gone, running or not."""
    proc, port = _start_watch(tmp_path)
    try:
        assert len(_watch_containers(docker_client, proc.pid)) == 1
        proc.send_signal(signum)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130 and "xpukit: interrupted" in out, out[-2000:]
    assert "Traceback" not in out
    assert not _watch_containers(docker_client, proc.pid, running_only=False)
    assert not _listening(port)


@pytest.mark.docker
def test_sigkill_of_the_invoke_stops_its_container_and_the_next_start_removes_it(test_image, docker_client, tmp_path):
    """SIGKILL gives invoke no chance to clean up: the watch in the container sees its lifeline close
    and stops within seconds (no container left running, the port free); the stopped container,
    labelled with a pid that is gone, is what the next watch's start removes."""
    from xpukit.host.run.containers import sweep_watch_containers

    proc, port = _start_watch(tmp_path)
    try:
        [container] = _watch_containers(docker_client, proc.pid)
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 30
        while _watch_containers(docker_client, proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _watch_containers(docker_client, proc.pid), "the killed invoke's watch is still running"
        assert not _listening(port)
        container.reload()
        assert container.attrs["State"]["ExitCode"] == 0  # the watch stopped as on Ctrl-C
        assert container.logs().decode().rstrip().endswith("xpukit: watch: stopped")
        assert container.name in sweep_watch_containers(docker_client)
        assert not _watch_containers(docker_client, proc.pid, running_only=False)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        for left in _watch_containers(docker_client, proc.pid, running_only=False):
            left.remove(force=True)
