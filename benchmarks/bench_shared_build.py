"""Shared build cache benchmark (issue 11): a cold build against a build that reuses a teammate's push.

    python benchmarks/bench_shared_build.py [--runs 2] [--profile cpu] [--json OUT]

Everything runs here, on 127.0.0.1, and is stopped by process id when the run ends (also on a
failure or Ctrl-C): an OCI registry with an htpasswd user, and per run two private Docker engines,
each with its own data root (tests/support/services.py). The engine at DOCKER_HOST is only read (its local
base image is saved from it when present; otherwise engine A runs `invoke base`).

One run:
  A: `docker builder prune -af`, then `invoke build --rebuild` with no registry and no cache
     source (the cold build), then `invoke push` to the registry (inline cache metadata included).
  B: an empty engine with only the base loaded, `docker builder prune -af`, then
     `invoke build --rebuild --registry ...`: BuildKit reads A's image as a cache source
     (`--cache-from <registry>/xpukit@<digest>`, from the lock `invoke push` wrote) and reuses its
     layers. The target is B's time <= 25% of the cold build's, both measured in the same run.
     Then B drops the image and pulls the same digest (the floor for any engine that does not
     build), and engine C, whose dockerd runs with MOBY_DISABLE_PIGZ=1, pulls it too: dockerd
     gunzips layers with unpigz when its PATH has one, in Go otherwise.

The private engines have no NAT, so the builds' RUN steps use the host's network
(XPUKIT_BUILD_NETWORK=host). The CA bundle is the kit's default (`--ca-bundle auto`). The tasks run
in a copy of the checkout, so `invoke push` never rewrites the committed env/lock/images.toml.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common import report  # noqa: E402
from tests.support.services import MissingTool, registry, second_engine  # noqa: E402
from xpukit.errors import XpukitError  # noqa: E402
from xpukit.host import build_cli  # noqa: E402
from xpukit.host.image import build  # noqa: E402
from xpukit.host.image import registry as reg  # noqa: E402
from xpukit.host.versions import pins  # noqa: E402

USER, PASSWORD = "bench", "bench-only-password"
NAMESPACE = "team"
# Checkout parts a task never needs; .git stays out so the copy's lock is the only one touched.
SKIP = shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache", ".ruff_cache", "node_modules", "*.pyc")


class BenchError(Exception):
    pass


def _on_sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # the same clean-up as Ctrl-C: every service stopped by its pid


def run(cmd: list[str], env: dict[str, str], cwd: Path, log: Path, what: str) -> float:
    """Run ``cmd`` with its output in ``log``; its wall time in seconds. A failure is one line."""
    start = time.perf_counter()
    with open(log, "ab") as out:
        out.write(f"\n$ {shlex.join(cmd)}\n".encode())
        out.flush()
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        try:
            code = proc.wait()
        except BaseException:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(20)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            raise
    elapsed = time.perf_counter() - start
    if code != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise BenchError(f"{what} failed (exit {code}): {tail[0][:200]} (log: {log})")
    return elapsed


def task_env(docker_host: str, **extra: str) -> dict[str, str]:
    """The environment a teammate's shell would have: this engine, the cpu profile, host network
    for RUN steps; no registry setting or credential inherited from the caller."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("XPUKIT_REGISTRY") and k != "DOCKER_CONFIG"}
    env.update(DOCKER_HOST=docker_host, XPUKIT_BUILD_NETWORK="host", DOCKER_BUILDKIT="1", **extra)
    return env


def cached_steps(log_text: str) -> tuple[int, int]:
    """(steps BuildKit reported CACHED, steps that ran) in the last build of a plain-progress log."""
    text = log_text[log_text.rfind("$ ") :]
    steps: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"#(\d+) (.*)", line)
        if m:
            steps[m.group(1)] = steps.get(m.group(1), "") + m.group(2) + "\n"
    # Dockerfile steps ("[stage n/m] ..."), less FROM: a base is loaded, never a cache hit.
    runs = [s for s in steps.values() if re.match(r"\[[\w-]+ +\d+/\d+\] (?!FROM )", s)]
    cached = sum("CACHED" in s for s in runs)
    return cached, len(runs) - cached


def save_base(base: str, tar: Path, work: Path, checkout: Path, docker_cli: str) -> str:
    """The local base as a tar: saved from the engine at DOCKER_HOST when it has it; '' otherwise."""
    outer = os.environ.get("DOCKER_HOST", "")
    probe = subprocess.run([docker_cli, "image", "inspect", base], capture_output=True, check=False)
    if probe.returncode != 0:
        return ""
    run(
        [docker_cli, "save", "-o", str(tar), base],
        {**os.environ, "DOCKER_HOST": outer},
        checkout,
        work / "base.log",
        "docker save",
    )
    return f"saved from {outer or 'the default engine'}"


def one_run(index: int, work: Path, checkout: Path, base: str, base_tar: Path, docker_cli: str) -> dict[str, Any]:
    run_dir = work / f"run{index}"
    run_dir.mkdir()
    logs = run_dir / "logs"
    logs.mkdir()
    invoke = [sys.executable, "-m", "invoke"]
    result: dict[str, Any] = {}
    with (
        registry(run_dir / "registry", {USER: PASSWORD}) as address,
        second_engine(run_dir / "engine-a") as host_a,
        second_engine(run_dir / "engine-b") as host_b,
        second_engine(run_dir / "engine-c", {"MOBY_DISABLE_PIGZ": "1"}) as host_c,
    ):
        where = f"{address}/{NAMESPACE}"
        password = run_dir / "password"
        password.write_text(PASSWORD)
        env_a = task_env(host_a, XPUKIT_REGISTRY_USER=USER, XPUKIT_REGISTRY_PASSWORD_FILE=str(password))
        # B's build reads the cache through BuildKit, which takes `docker login`'s store.
        config_b = run_dir / "docker-config-b"
        config_b.mkdir()
        env_b = task_env(host_b, DOCKER_CONFIG=str(config_b))
        # C only pulls, with dockerd's own Go gunzip instead of unpigz: what pigz buys a pull.
        env_c = task_env(host_c, DOCKER_CONFIG=str(config_b))
        login = [docker_cli, "login", "-u", USER, "--password-stdin", address]
        proc = subprocess.run(login, env=env_b, input=PASSWORD, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise BenchError(f"docker login {address} on engine B failed: {proc.stderr.strip()[:200]}")

        for env, name in ((env_a, "a"), (env_b, "b"), (env_c, "c")):
            if base_tar.exists():
                run([docker_cli, "load", "-i", str(base_tar)], env, checkout, logs / f"base-{name}.log", "docker load")
            elif name == "a":
                run([*invoke, "base"], env, checkout, logs / "base-a.log", "invoke base on engine A")
                run([docker_cli, "save", "-o", str(base_tar), base], env, checkout, logs / "base-a.log", "docker save")
            run([docker_cli, "builder", "prune", "-af"], env, checkout, logs / f"prune-{name}.log", "builder prune")

        lock = checkout / "env" / "lock" / "images.toml"
        lock.unlink(missing_ok=True)  # the cold build must have no cache source at all
        cold = run([*invoke, "build", "--rebuild"], env_a, checkout, logs / "build-a.log", "cold build on engine A")
        if "are reused where they match" in (logs / "build-a.log").read_text():
            raise BenchError("the cold build had a --cache-from source")
        push = run([*invoke, "push", "--registry", where], env_a, checkout, logs / "push-a.log", "invoke push")
        entry = reg.read_lock(lock)["cpu"]

        shared = run(
            [*invoke, "build", "--rebuild", "--registry", where], env_b, checkout, logs / "build-b.log", "build on B"
        )
        log_b = (logs / "build-b.log").read_text(errors="replace")
        source = entry.reference
        if f"layers from {source} are reused" not in log_b:
            raise BenchError(f"B's build did not use {source} as its cache source (log: {logs / 'build-b.log'})")
        cached, ran = cached_steps(log_b)

        tag = f"xpukit:{entry.tag}"
        layers = []
        for env in (env_a, env_b):
            out = subprocess.run(
                [docker_cli, "image", "inspect", "-f", "{{json .RootFS.Layers}}", tag],
                env=env, capture_output=True, text=True, check=False,
            )  # fmt: skip
            if out.returncode != 0:
                raise BenchError(f"{tag} is not on engine {env['DOCKER_HOST']}: {out.stderr.strip()[:200]}")
            layers.append(out.stdout.strip())
        # The floor for any engine that does not build: a plain pull of the same digest on B,
        # from an empty image store and build cache (the base stays).
        image_id = subprocess.run(
            [docker_cli, "image", "inspect", "-f", "{{.Id}}", tag],
            env=env_b,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        # By id: every tag B's build gave the image goes, and with it every layer the base does not hold.
        run([docker_cli, "rmi", "-f", image_id], env_b, checkout, logs / "reset-b.log", "docker rmi on B")
        run([docker_cli, "builder", "prune", "-af"], env_b, checkout, logs / "reset-b.log", "builder prune on B")
        pull = run([docker_cli, "pull", source], env_b, checkout, logs / "pull-b.log", "docker pull on B")
        pull_go = run([docker_cli, "pull", source], env_c, checkout, logs / "pull-c.log", "docker pull on C")
        result = {
            "cold_build_s": round(cold, 1),
            "pull_s": round(pull, 1),
            "pull_without_pigz_s": round(pull_go, 1),
            "shared_over_pull": round(shared / pull, 3),
            "push_s": round(push, 1),
            "shared_build_s": round(shared, 1),
            "shared_over_cold": round(shared / cold, 3),
            "b_steps_cached": cached,
            "b_steps_run": ran,
            "b_layers_equal_a": layers[0] == layers[1],
            "digest": entry.digest,
            "tag": tag,
        }
        print(f"run {index}: {result}", file=sys.stderr, flush=True)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="cold + shared pairs, each on fresh engines")
    parser.add_argument("--profile", default="cpu", choices=["cpu"], help="the cpu profile (the xpu one takes hours)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the logs folder (the engines' data always goes)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench_shared_build: error: needs root to start Docker engines (fix: run it as root)")
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:  # the CLI `invoke build` picks (a newer one without buildx cannot even prune BuildKit's cache)
        docker_cli = build_cli.pick_cli(os.environ.get("XPUKIT_DOCKER_CLI", "auto")).path
    except XpukitError as exc:
        sys.exit(f"bench_shared_build: error: {exc.one_line()}")
    profile = pins.load().profile(args.profile)
    base = build.local_base_name(profile)

    work = Path(tempfile.mkdtemp(prefix="xpukit-bench-share-"))
    runs: list[dict[str, Any]] = []
    try:
        checkout = work / "checkout"
        shutil.copytree(ROOT, checkout, ignore=SKIP, symlinks=True)
        if reg.LOCK_PATH.exists():
            print(f"note: the copy's {reg.LOCK_PATH.name} is removed before each cold build", file=sys.stderr)
        base_tar = work / "base.tar"
        base_from = save_base(base, base_tar, work, checkout, docker_cli) or "invoke base on engine A"
        for index in range(1, args.runs + 1):
            runs.append(one_run(index, work, checkout, base, base_tar, docker_cli))
    except BenchError as exc:
        print(f"bench_shared_build: error: {exc}", file=sys.stderr)
        return 1
    except MissingTool as exc:
        print(f"bench_shared_build: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bench_shared_build: interrupted; every service was stopped", file=sys.stderr)
        return 130
    finally:
        if args.keep:
            shutil.rmtree(work / "checkout", ignore_errors=True)
            (work / "base.tar").unlink(missing_ok=True)
            print(f"logs kept in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)

    ratios = [r["shared_over_cold"] for r in runs]
    cli_version = subprocess.run([docker_cli, "version", "-f", "{{.Client.Version}}"], capture_output=True, text=True)
    result = {
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "os": platform.platform(),
            "docker_cli": f"{docker_cli} {cli_version.stdout.strip()}",
            # dockerd gunzips pulled layers with unpigz when its PATH has one (engines A and B).
            "unpigz": shutil.which("unpigz") or "not found",
        },
        "base": f"{base} ({base_from})",
        "runs": runs,
        "summary": {
            "shared_over_cold_min": min(ratios),
            "shared_over_cold_max": max(ratios),
            "shared_over_cold_median": statistics.median(ratios),
            "target": "<= 0.25",
            "met": max(ratios) <= 0.25,
            "shared_over_pull_median": statistics.median(r["shared_over_pull"] for r in runs),
            "pull_without_pigz_over_pull_median": statistics.median(
                r["pull_without_pigz_s"] / r["pull_s"] for r in runs
            ),
        },
    }
    report(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
