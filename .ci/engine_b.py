"""CI step after `invoke test`: engine B, empty, runs the kit from the digest engine A pushed, without building.

    python .ci/engine_b.py        (DOCKER_HOST = engine A, which holds the image `invoke test` built)

Started here on 127.0.0.1 and stopped by process id at the end (also on a failure, Ctrl-C or
SIGTERM): a registry with an htpasswd user and a second, empty Docker engine B (tests/support/services.py).
Then, in a copy of the checkout (so `invoke push` never rewrites the committed
env/lock/images.toml):

  A: invoke push --registry 127.0.0.1:PORT/ci          (records the digest in the copy's lock)
  B: invoke pull; invoke demo-ur; invoke test --suite smoke   (XPUKIT_REQUIRE_DOCKER=1)

and checks: B's image carries the lock's digest (its RepoDigests), B's image id never changes,
B's BuildKit cache stays empty through the pull and the demo, and no task on B says it builds the
kit's image. One line per failure; exit 1.

On B only the tests marked sharing_smoke run (on the host and in the image): they prove the pulled
image works. Everything ran on engine A, on the same image, in the same CI run; B has no base and
its bridge has no route out, by design, so nothing there could build.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.services import MissingTool, registry, second_engine  # noqa: E402
from xpukit.errors import XpukitError  # noqa: E402
from xpukit.host import engine  # noqa: E402
from xpukit.host.image import registry as reg  # noqa: E402

USER, PASSWORD = "ci", "ci-only-password"
SKIP = shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache", ".ruff_cache", "*.pyc")
# The tests engine B runs (`invoke test --suite smoke`): those marked sharing_smoke, a few that
# prove the pulled image works (its labels and manifest, its user, no CA bundle in it, the demo,
# a compile, launches, read-only runs). Engine A ran every test on the same image just before;
# running them all again on B proved nothing more and took a quarter of CI. At least this many
# must pass, so a marker lost in a refactor fails here instead of passing with nothing run.
SMOKE_AT_LEAST = 10
BUILDING = ("is missing; building it", "building xpukit:")


class StepError(Exception):
    pass


def _on_sigterm(signum, frame):
    raise KeyboardInterrupt


def say(message: str) -> None:
    print(f"engine-b: {message}", flush=True)


def task(args: list[str], env: dict[str, str], cwd: Path, what: str) -> str:
    """Run `invoke ARGS`, its output streamed and kept; a failure is a StepError."""
    cmd = [sys.executable, "-m", "invoke", *args]
    say("$ invoke " + " ".join(args))
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(line, end="", flush=True)
            lines.append(line)
        code = proc.wait()
    except BaseException:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(30)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        raise
    say(f"{what}: exit {code} in {time.monotonic() - start:.0f} s")
    output = "".join(lines)
    if code != 0:
        raise StepError(f"{what} failed (exit {code}); its output is above")
    found = [b for b in BUILDING if b in output]
    if found and args[0] != "push":
        raise StepError(f"{what} on engine B built the image ({found[0]!r}); it must run the pulled digest")
    return output


def build_cache_bytes(sdk) -> int:
    return sum(int(item.get("Size", 0)) for item in (sdk.df().get("BuildCache") or []))


def main() -> int:
    signal.signal(signal.SIGTERM, _on_sigterm)
    host_a = os.environ.get("DOCKER_HOST", "")
    work = Path(tempfile.mkdtemp(prefix="xpukit-engine-b-"))
    try:
        checkout = work / "checkout"
        shutil.copytree(ROOT, checkout, ignore=SKIP, symlinks=True)
        password = work / "password"
        password.write_text(PASSWORD)
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("XPUKIT_REGISTRY")}
        base_env.update(XPUKIT_REGISTRY_USER=USER, XPUKIT_REGISTRY_PASSWORD_FILE=str(password))
        base_env.pop("XPUKIT_TEST_IMAGE", None)
        lock = checkout / "env" / "lock" / "images.toml"
        lock.unlink(missing_ok=True)  # whatever the checkout recorded, this run pushes and pulls its own

        with registry(work / "registry", {USER: PASSWORD}) as address:
            where = f"{address}/ci"
            task(["push", "--registry", where], {**base_env, "DOCKER_HOST": host_a}, checkout, "invoke push on A")
            entry = reg.read_lock(lock)["cpu"]
            pushed = entry.reference
            say(f"A pushed {pushed} (tag {entry.tag})")

            with second_engine(work / "engine-b") as host_b:
                # No base on B and no base setting: the content tag takes the base the lock records
                # for the pushed image, so B's tag is A's.
                if not entry.base:
                    raise StepError("the lock records no base for the pushed image")
                env_b = {**base_env, "DOCKER_HOST": host_b}
                sdk_b = engine.client(host_b, timeout=600)
                try:
                    if sdk_b.images.list() or build_cache_bytes(sdk_b):
                        raise StepError("engine B is not empty before the pull")
                    task(["pull"], env_b, checkout, "invoke pull on B")
                    image = sdk_b.images.get(f"xpukit:{entry.tag}")
                    if pushed not in image.attrs.get("RepoDigests", []):
                        raise StepError(f"B's image digests {image.attrs.get('RepoDigests')} lack the lock's {pushed}")
                    say(f"B's image {image.id[:19]} carries the lock's digest {entry.digest}")
                    demo = task(["demo-ur", "-n", "5000"], env_b, checkout, "invoke demo-ur on B")
                    if "OK" not in demo:
                        raise StepError("invoke demo-ur on B did not print OK")
                    if build_cache_bytes(sdk_b):
                        raise StepError("engine B's BuildKit cache is not empty after pull and demo: something built")
                    test_env = {**env_b, "XPUKIT_REQUIRE_DOCKER": "1"}
                    tested = task(["test", "--suite", "smoke"], test_env, checkout, "invoke test --suite smoke on B")
                    counts = re.search(r"^xpukit: (\d+) passed, (\d+) failed", tested, re.M)
                    if not counts or int(counts.group(1)) < SMOKE_AT_LEAST or int(counts.group(2)):
                        found = counts.group(0) if counts else "no summary line"
                        raise StepError(f"the smoke tests on B: {found}; at least {SMOKE_AT_LEAST} must pass")
                    if sdk_b.images.get(f"xpukit:{entry.tag}").id != image.id:
                        raise StepError("B's image changed during the tests: it was rebuilt")
                    say(f"OK: engine B ran pull, demo-ur and test from {pushed} without building")
                finally:
                    sdk_b.close()
        return 0
    except StepError as exc:
        print(f"engine-b: error: {exc}", file=sys.stderr, flush=True)
        return 1
    except (XpukitError, reg.RegistryError) as exc:
        print(f"engine-b: error: {exc.one_line()}", file=sys.stderr, flush=True)
        return 1
    except MissingTool as exc:
        print(f"engine-b: error: {exc}", file=sys.stderr, flush=True)
        return 1
    except RuntimeError as exc:  # a service that did not start (tests/support/services.py)
        print(f"engine-b: error: {str(exc).splitlines()[0][:300]}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        print("engine-b: interrupted; the registry and engine B were stopped", file=sys.stderr, flush=True)
        return 130
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
