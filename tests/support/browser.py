"""Debian's headless chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``:
JSON messages ending in NUL on fds 3 and 4), so a test can watch a live page change without a
websocket library: open a URL, evaluate JavaScript in it, wait for a condition."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest


class Browser:
    def __init__(self, profile: Path) -> None:
        chromium = shutil.which("chromium")
        if chromium is None:
            pytest.skip("chromium is not installed (.ci/run installs Debian's chromium)")
        to_child, self._write = os.pipe()
        self._read, from_child = os.pipe()
        os.set_inheritable(to_child, True)
        os.set_inheritable(from_child, True)
        # chromium reads commands on fd 3 and writes replies on fd 4: the pipes are moved there before
        # exec, and 3 and 4 are the fds kept open (pass_fds closes the others after preexec_fn)
        self._proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
             "--disable-background-networking", "--disable-component-update", f"--user-data-dir={profile}",
             "--remote-debugging-pipe", "about:blank"],
            pass_fds=(3, 4), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=lambda: (os.dup2(to_child, 3), os.dup2(from_child, 4)),
        )  # fmt: skip
        os.close(to_child)
        os.close(from_child)
        self._buffer = b""
        self._next = 0
        self.session = ""

    def call(self, method: str, params: dict[str, Any] | None = None, session: str = "") -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self._buffer:
                chunk = os.read(self._read, 1 << 16)
                if not chunk:
                    raise RuntimeError("chromium closed its DevTools pipe")
                self._buffer += chunk
            raw, _, self._buffer = self._buffer.partition(b"\0")
            reply = json.loads(raw)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def open(self, url: str) -> None:
        target = self.call("Target.createTarget", {"url": url})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, self.session)
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float) -> Any:
        """The expression's value once truthy; fails after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                value = self.evaluate(expression)
            except RuntimeError:
                value = None  # the page is reloading
            if value:
                return value
            time.sleep(0.1)
        page = self.evaluate("document.body && document.body.innerText.slice(0, 500)")
        raise AssertionError(f"{expression} stayed false for {timeout} s; the page: {page}")

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, OSError):
            self.call("Browser.close")
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        os.close(self._read)
        os.close(self._write)
