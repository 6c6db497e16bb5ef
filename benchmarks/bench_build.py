"""Build benchmark: cold build, no-op rebuild, rebuild after editing one example, image size.

    python benchmarks/bench_build.py [--profile cpu] [--ca-bundle PATH] [--cold] [--json OUT]

--cold prunes BuildKit's whole cache first (wheelhouse and apt cache mounts included), so the cold
build downloads everything again.

    python benchmarks/bench_build.py --reproducible [--baseline REV] [--repeat 2] [--json OUT]

--reproducible: side by side in one run, on podman, each cold build in an empty store of its own
(xpukit.host.verify.rebuild.Store: no layers, no cache mounts): this tree built without buildah's
--timestamp (or, with --baseline REV, this tree's context with the Dockerfile and scripts/ of REV)
against this tree's reproducible build, alternating, REPEAT times each; then a no-op rebuild and a
one-example edit in the last reproducible store. The source-level fixes (no logs or caches in the
layers, hash-checked .pyc) live in scripts/ and so are in both builds of the default comparison;
an old REV must still build against today's sources (the launcher's ABI moves with xpukit/).

Uses the engine at DOCKER_HOST and the base `invoke build` would pick. Image size is compared
with what it installs: the base, the apt packages added on top (dpkg Installed-Size)
and the venv as pip installed it (hardlinked duplicates counted each time).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from xpukit import layout  # noqa: E402
from xpukit.host import build_cli, engine  # noqa: E402
from xpukit.host.image import build  # noqa: E402
from xpukit.host.versions import pins  # noqa: E402


def timed_build(plan: build.BuildPlan) -> float:
    start = time.perf_counter()
    result = subprocess.run(plan.command, env={**os.environ, **plan.env}, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"build failed:\n{result.stderr[-3000:]}")
    return elapsed


def in_image(sdk, image: str, script: str) -> str:
    return sdk.containers.run(image, ["bash", "-c", script], remove=True, user="0").decode().strip()


def dpkg_kib(sdk, image: str) -> int:
    out = in_image(sdk, image, "dpkg-query -W -f '${Installed-Size}\\n'")
    return sum(int(x) for x in out.split() if x.isdigit())


def _run_timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    result = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"build failed: {' '.join(cmd[:8])} ...\n{(result.stdout + result.stderr)[-3000:]}")
    return elapsed


def _baseline_context(rev: str, dest: Path) -> Path:
    """This tree's build context with the Dockerfile and scripts/ of ``rev``."""
    build.copy_context(ROOT, dest)
    shutil.rmtree(dest / "scripts")
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "Dockerfile", "scripts"], capture_output=True)
    if archive.returncode != 0:
        sys.exit(f"git archive {rev} failed: {archive.stderr.decode()[-300:]}")
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


def reproducible_main(args: argparse.Namespace) -> int:
    """Today's cold build against the reproducible one, side by side on podman (module docstring)."""
    from types import SimpleNamespace

    from xpukit.host import podman as podman_mod
    from xpukit.host.verify import rebuild as verify

    podman = podman_mod.find_podman()
    if podman is None:
        sys.exit("--reproducible needs podman (apt-get install podman)")
    sdk = engine.client()
    profile = pins.load().profile(args.profile)
    base = build.choose_base(profile, "", lambda ref: engine.image_exists(sdk, ref), None, print)
    ctx = SimpleNamespace(
        settings=SimpleNamespace(image="xpukit-bench", build_network=os.environ.get("XPUKIT_BUILD_NETWORK", "host")),
        ca_bundle=SimpleNamespace(path=args.ca_bundle),
    )
    plan = SimpleNamespace(profile=profile, base=base)
    baseline = args.baseline or "this tree without --timestamp"
    results: dict[str, object] = {"baseline": baseline, "today_cold_s": [], "reproducible_cold_s": []}
    with tempfile.TemporaryDirectory(dir="/var/tmp", prefix="xpukit-bench-") as tmp:
        work = Path(tmp)
        new_ctx = build.copy_context(ROOT, work / "ctx-new")
        old_ctx = _baseline_context(args.baseline, work / "ctx-old") if args.baseline else new_ctx
        new_cmd = verify.rebuild_command(plan, podman, new_ctx, "xpukit-bench:new", ctx)  # type: ignore[arg-type]
        old_cmd = verify.rebuild_command(plan, podman, old_ctx, "xpukit-bench:old", ctx)  # type: ignore[arg-type]
        at = old_cmd.index("--timestamp")
        old_cmd = old_cmd[:at] + old_cmd[at + 2 :]  # today's podman build: no --timestamp
        stores: list[verify.Store] = []
        try:
            for round_ in range(args.repeat):
                for name, cmd in (("today_cold_s", old_cmd), ("reproducible_cold_s", new_cmd)):
                    store = verify.Store(podman, work / f"store-{len(stores)}")
                    stores.append(store)
                    verify._load_base(sdk, base, store, work, lambda _m: None)
                    seconds = round(_run_timed(store.wrap(cmd), store.env), 1)
                    results[name].append(seconds)  # type: ignore[union-attr]
                    print(f"round {round_ + 1}: {name} {seconds} s", flush=True)
            last = stores[-1]
            warm = last.wrap(new_cmd)  # the same command: --layers now finds the cold build's layers
            results["ids_equal"] = len({s.image_id("xpukit-bench:new") for s in stores[1::2]}) == 1
            # --layers keeps the layers from here on; the cold builds above kept none.
            _run_timed(warm, last.env)
            results["reproducible_noop_rebuild_s"] = round(_run_timed(warm, last.env), 2)
            example = sorted((new_ctx / "examples").glob("*.py"))[0]
            example.write_text(example.read_text() + f"\n# benchmark edit {time.time()}\n")
            results["reproducible_example_edit_rebuild_s"] = round(_run_timed(warm, last.env), 2)
        finally:
            for store in stores:
                store.remove()
    today, repro = results["today_cold_s"], results["reproducible_cold_s"]
    results["reproducible_over_today"] = round(sorted(repro)[len(repro) // 2] / sorted(today)[len(today) // 2], 3)  # type: ignore[arg-type]
    machine = {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(), "podman": podman}
    print(json.dumps({"machine": machine, "results": results}, indent=2))
    if args.json:
        args.json.write_text(json.dumps({"machine": machine, "results": results}, indent=2) + "\n")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reproducible", action="store_true", help="today's cold build vs the reproducible one")
    parser.add_argument(
        "--baseline",
        default="",
        help="a revision whose Dockerfile and scripts/ to build as the baseline (default: this tree)",
    )
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--ca-bundle", default=os.environ.get("XPUKIT_CA_BUNDLE", ""))
    parser.add_argument("--cold", action="store_true", help="prune BuildKit's cache first")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.reproducible:
        return reproducible_main(args)

    sdk = engine.client()
    cli = build_cli.pick_cli()
    profile = pins.load().profile(args.profile)
    base = build.choose_base(profile, "", lambda ref: engine.image_exists(sdk, ref), None, print)
    plan = build.plan(ROOT, profile, base, "xpukit-bench", cli, args.ca_bundle, progress="plain")
    image = plan.tags[0]

    results: dict[str, float | int | str] = {}
    if args.cold:
        for tag in plan.tags:
            subprocess.run([cli.path, "rmi", "-f", tag], capture_output=True, check=False)
        subprocess.run([cli.path, "builder", "prune", "-af"], capture_output=True, check=True)
    results["first_build_s"] = round(timed_build(plan), 1)
    results["noop_rebuild_s"] = round(timed_build(plan), 2)

    with tempfile.TemporaryDirectory() as tmp:
        context = build.copy_context(ROOT, Path(tmp) / "ctx")
        example = sorted((context / "examples").glob("*.py"))[0]
        example.write_text(example.read_text() + f"\n# benchmark edit {time.time()}\n")
        edited = build.plan(context, profile, base, "xpukit-bench-edit", cli, args.ca_bundle, progress="plain")
        results["example_edit_rebuild_s"] = round(timed_build(edited), 2)
        for tag in edited.tags:
            subprocess.run([cli.path, "rmi", "-f", tag], capture_output=True, check=False)

    image_bytes = sdk.images.get(image).attrs["Size"]
    base_bytes = sdk.images.get(base).attrs["Size"]
    apt_added = (dpkg_kib(sdk, image) - dpkg_kib(sdk, base)) * 1024
    venv_as_installed = int(in_image(sdk, image, f"du -sb -l {layout.VENV}").split()[0])
    venv_on_disk = int(in_image(sdk, image, f"du -sb {layout.VENV}").split()[0])
    payload = base_bytes + apt_added + venv_as_installed
    results.update(
        image_mib=image_bytes >> 20,
        base_mib=base_bytes >> 20,
        apt_added_mib=apt_added >> 20,
        venv_as_installed_mib=venv_as_installed >> 20,
        venv_on_disk_mib=venv_on_disk >> 20,
        payload_mib=payload >> 20,
        image_over_payload=round(image_bytes / payload, 3),
        cold=str(args.cold),
    )
    machine = {
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "docker_cli": f"{cli.path} {cli.version}",
        "engine": sdk.version().get("Version"),
    }
    print(json.dumps({"machine": machine, "results": results}, indent=2))
    if args.json:
        args.json.write_text(json.dumps({"machine": machine, "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
