"""Build benchmark: cold build, no-op rebuild, rebuild after editing one example, image size.

    python benchmarks/bench_build.py [--profile cpu] [--ca-bundle PATH] [--cold] [--json OUT]

--cold prunes BuildKit's whole cache first (wheelhouse and apt cache mounts included), so the cold
build downloads everything again. Uses the engine at DOCKER_HOST and the base `invoke build` would
pick. Image size is compared with what it installs: the base, the apt packages added on top
(dpkg Installed-Size) and the venv as pip installed it (hardlinked duplicates counted each time).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from xpukit.host import build, engine, pins  # noqa: E402


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--ca-bundle", default=os.environ.get("XPUKIT_CA_BUNDLE", ""))
    parser.add_argument("--cold", action="store_true", help="prune BuildKit's cache first")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    sdk = engine.client()
    cli = engine.pick_cli()
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
    venv_as_installed = int(in_image(sdk, image, "du -sb -l /opt/xpukit/venv").split()[0])
    venv_on_disk = int(in_image(sdk, image, "du -sb /opt/xpukit/venv").split()[0])
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
