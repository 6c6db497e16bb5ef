"""A container (or a `--where host` command) that a signal ended: one line naming the signal and the
fix, the exit code kept (137 for SIGKILL); out of memory said as such where the engine says so
(State.OOMKilled). A real `docker kill` of a task's container is tests/engine/test_interrupt.py; here
the mapping, the SDK path with a container the engine reports OOM-killed, and a real host process."""

from __future__ import annotations

import sys

import pytest

from xpukit.host import processes

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("code", "oom", "wants"),
    [
        (137, False, "the container was killed by signal 9 (SIGKILL, exit 137): docker kill, or out of memory"),
        (137, True, "the container ran out of memory: the OOM killer ended it (SIGKILL, exit 137)"),
        (143, False, "the container was stopped by signal 15 (SIGTERM, exit 143) from outside"),
        (139, False, "the container crashed with signal 11 (SIGSEGV, exit 139)"),
        (141, False, "the container was ended by signal 13 (SIGPIPE, exit 141)"),
    ],
)
def test_an_exit_code_of_128_plus_a_signal_is_named(code, oom, wants):
    killed = processes.killed_by_signal(code, oom=oom)
    assert killed is not None and killed.message.startswith(wants) and killed.fix


@pytest.mark.parametrize("code", [0, 1, 2, 5, 128, 130, 255])
def test_other_exit_codes_and_ctrl_c_are_not(code):
    """130 is Ctrl-C: the kit's own `interrupted` line has said it."""
    assert processes.killed_by_signal(code) is None


class _Container:
    """What run_container uses of the SDK's container: the engine reports it OOM-killed."""

    def __init__(self, code: int, oom: bool) -> None:
        self.code, self.attrs, self._oom, self.removed = code, {}, oom, False

    def start(self):
        pass

    def logs(self, stream, follow):
        return iter([b"working\n"])

    def wait(self):
        return {"StatusCode": self.code}

    def reload(self):
        self.attrs = {"State": {"OOMKilled": self._oom, "ExitCode": self.code}}

    def remove(self, force):
        self.removed = True


class _Sdk:
    def __init__(self, container):
        self.containers = self
        self.container = container

    def create(self, image, command, detach, **options):
        return self.container


@pytest.mark.parametrize(("code", "oom", "wants"), [(137, True, "ran out of memory"), (137, False, "docker kill")])
def test_run_container_says_how_the_container_ended(capsys, code, oom, wants):
    container = _Container(code, oom)
    assert processes.run_container(_Sdk(container), "img", ["python"]) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("xpukit: error: the container ") and wants in err[0], err
    assert "(fix: " in err[0] and container.removed


def test_run_container_says_nothing_for_an_ordinary_failure(capsys):
    assert processes.run_container(_Sdk(_Container(1, False)), "img", ["python"]) == 1
    assert not capsys.readouterr().err


def test_a_host_command_killed_by_a_signal_is_one_line_and_exit_128_plus_it(capfd):
    """`--where host` runs `python -m xpukit ...` as a child: killed, it reports -9, which invoke would
    have turned into exit 247 and no line."""
    code = processes.stream_process([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    err = capfd.readouterr().err.strip().splitlines()
    assert code == 137 and len(err) == 1, err
    assert err[0].startswith("xpukit: error: `python") and "killed by signal 9 (SIGKILL, exit 137)" in err[0], err
