"""What a task runs: commands on the host (streamed, or streamed keeping the log's tail) and containers
through the engine's SDK (streamed, or collected). Each is recorded as the command line a dry run
prints (:data:`RECORD_ENV`), and Ctrl-C stops it cleanly: nothing keeps running."""

from __future__ import annotations

import collections
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from xpukit.errors import EXIT_INTERRUPTED, XpukitError, error_line
from xpukit.host import podman as podman_mod
from xpukit.host import ui

if TYPE_CHECKING:  # the SDK is imported where it is used: `invoke --list` must not need it
    from docker import DockerClient

# When set, every command a task executes (build CLI, host pytest, a container's `docker run`
# equivalent) is appended to this file, one shell-quoted line each, as a dry run prints it: the
# tests compare the two (tests/engine/test_plan_value.py).
RECORD_ENV = "XPUKIT_RECORD_COMMANDS"


def record(line: str, environ: Mapping[str, str] | None = None) -> None:
    """Append one executed command to $XPUKIT_RECORD_COMMANDS (nothing when unset)."""
    path = (os.environ if environ is None else environ).get(RECORD_ENV, "")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(line + "\n")


def printable(command: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """A command as a shell line, its extra environment first: what a dry run prints."""
    prefix = " ".join(f"{k}={v}" for k, v in (env or {}).items())
    return (prefix + " " if prefix else "") + " ".join(shlex.quote(part) for part in command)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Ctrl-C (SIGTERM too where a caller raises it as one: verify) reaches the command as SIGINT; one
    that does not stop within a minute is killed."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def stream_process(cmd: Sequence[str], env: Mapping[str, str] | None = None) -> int:
    """Run a command with its output going straight to ours; Ctrl-C stops it cleanly. A command
    killed by a signal (the OOM killer, `kill -9`) is one line and exit 128 + its number."""
    record(printable(cmd, env))
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.Popen(cmd, env=full_env)
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        _stop(proc)
        raise
    if code < 0:  # killed by signal -code: what a shell (and a container engine) reports as 128 + it
        code = 128 - code
        say_killed(code, f"`{' '.join([os.path.basename(cmd[0]), *cmd[1:3]])}`")
    return code


_CRASHES = (signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGABRT)


def killed_by_signal(code: int, what: str = "the container", oom: bool = False) -> XpukitError | None:
    """What an exit code of 128 + N says when a signal ended ``what`` (None for any other code, and
    for 130: Ctrl-C, which the kit's own line has said already). ``oom``: the engine says its
    kernel's OOM killer did it (``docker inspect``'s State.OOMKilled)."""
    number = code - 128
    if not 0 < number < signal.NSIG or code == EXIT_INTERRUPTED:
        return None
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = f"signal {number}"
    how = f"signal {number} ({name}, exit {code})"
    if oom:
        return XpukitError(
            f"{what} ran out of memory: the OOM killer ended it ({name}, exit {code})",
            "give the engine more memory, or run less beside it",
        )
    if number == signal.SIGKILL:
        return XpukitError(
            f"{what} was killed by {how}: docker kill, or out of memory",
            "rerun; if memory ran out, give the engine more",
        )
    if number in _CRASHES:
        return XpukitError(f"{what} crashed with {how}", "rerun with --debug; if it happens again, report it")
    if number == signal.SIGTERM:
        return XpukitError(f"{what} was stopped by {how} from outside (docker stop, a shutdown)", "rerun")
    return XpukitError(f"{what} was ended by {how}", "rerun; if it happens again, rerun with --debug and report it")


def say_killed(code: int, what: str = "the container", oom: bool = False) -> None:
    """One error line for a container or command that a signal ended (nothing for any other code)."""
    if (killed := killed_by_signal(code, what, oom)) is not None:
        print(error_line(killed), file=sys.stderr, flush=True)


def stream_keeping_tail(
    cmd: Sequence[str], env: Mapping[str, str] | None = None, keep: int = 400
) -> tuple[int, list[str]]:
    """Run a command, showing its output (stdout and stderr, merged) as it comes; return its exit
    code and its last ``keep`` lines (to diagnose a failure). Ctrl-C stops it cleanly."""
    record(printable(cmd, env))
    full_env = {**os.environ, **(env or {})}
    tail: collections.deque[str] = collections.deque(maxlen=keep)
    proc = subprocess.Popen(cmd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        for raw in proc.stdout:  # type: ignore[union-attr]
            out = ui.progress_stream().buffer  # a build log is progress, never a task's data
            out.write(raw)
            out.flush()
            tail.append(raw.decode(errors="replace").rstrip("\n"))
        return proc.wait(), list(tail)
    except KeyboardInterrupt:
        _stop(proc)
        raise


def run_container(sdk: DockerClient, image: str, command: list[str], **options: Any) -> int:
    """Run a container, stream its output as it comes, remove it, return its exit code.

    Ctrl-C stops and removes the container before the interrupt goes on: nothing keeps running."""
    import docker

    container = sdk.containers.create(image, command, detach=True, **options)
    try:
        try:
            container.start()
        except docker.errors.APIError as exc:
            explained = podman_mod.explain_start_failure(str(exc))
            if explained is None:
                raise
            raise explained from None
        for chunk in container.logs(stream=True, follow=True):
            sys.stdout.buffer.write(chunk)
            sys.stdout.buffer.flush()
        code = int(container.wait().get("StatusCode", 1))
        if killed_by_signal(code) is not None:  # killed from outside: say so, and whether memory ran out
            say_killed(code, oom=_oom_killed(container))
        return code
    finally:
        # A second Ctrl-C during the clean-up must not leave the container behind either.
        for _ in range(3):
            try:
                container.remove(force=True)
                break
            except KeyboardInterrupt:
                continue
            except Exception:
                break


def _oom_killed(container: Any) -> bool:
    """Whether the engine's kernel OOM-killed the container (``docker inspect``'s State.OOMKilled)."""
    try:
        container.reload()
        return bool(container.attrs.get("State", {}).get("OOMKilled"))
    except Exception:  # the engine no longer answers for it: not known, so not said
        return False


def format_run_cli(cli: str, image: str, command: list[str], options: Mapping[str, Any]) -> list[str]:
    """The `docker run` line equivalent to ``run_container``'s SDK options, for --dry-run."""
    args = [cli, "run", "--rm"]
    if options.get("user"):
        args += ["--user", str(options["user"])]
    for host_path, spec in (options.get("volumes") or {}).items():
        args += ["-v", f"{host_path}:{spec['bind']}:{spec.get('mode', 'rw')}"]
    for key, value in (options.get("environment") or {}).items():
        args += ["-e", f"{key}={value}"]
    if options.get("working_dir"):
        args += ["-w", options["working_dir"]]
    if options.get("network_mode"):
        args += ["--network", options["network_mode"]]
    for device in options.get("devices") or []:
        args += ["--device", device]
    for gid in options.get("group_add") or []:
        args += ["--group-add", str(gid)]
    if options.get("shm_size"):
        args += ["--shm-size", str(options["shm_size"])]
    for limit in options.get("ulimits") or []:
        args += ["--ulimit", f"{limit['name']}={limit['soft']}:{limit['hard']}"]
    if options.get("tty"):
        args += ["-it"]
    return [*args, image, *command]


def run_collecting(sdk: DockerClient, image: str, command: list[str], options: Mapping[str, Any]) -> tuple[int, str]:
    """Run a container to its end; (exit code, its stdout). The container is removed. An image that
    is missing or a container that cannot start raises :class:`ContainerUnavailable`."""
    import docker

    try:
        container = sdk.containers.create(image, command, detach=True, **options)
    except docker.errors.ImageNotFound:
        raise ContainerUnavailable(f"image {image} not found") from None
    except docker.errors.APIError as exc:
        raise ContainerUnavailable(f"cannot start {image}: {exc.explanation or exc}") from None
    try:
        try:
            container.start()
        except docker.errors.APIError as exc:
            explained = podman_mod.explain_start_failure(str(exc))
            why = explained.one_line() if explained else (exc.explanation or str(exc))
            raise ContainerUnavailable(f"cannot start {image}: {why}") from None
        code = int(container.wait().get("StatusCode", 1))
        return code, container.logs(stdout=True, stderr=False).decode(errors="replace")
    finally:
        container.remove(force=True)


class ContainerUnavailable(Exception):
    """A container could not be created or started (image missing, engine refused)."""
