"""Build once, share by digest, end to end: engine A (the one `invoke test` uses) pushes the
checkout's image to a registry started here; engine B, a second and empty engine, finds it by the
lock's digest, pulls instead of building, and runs the UR demo from it."""

from __future__ import annotations

import functools
import os

import pytest

from tests.support.services import registry, second_engine
from xpukit.host import settings
from xpukit.host.image import registry as reg
from xpukit.host.image import sharing
from xpukit.host.image.plan import ensure_image, make_plan
from xpukit.host.run import containers

pytestmark = pytest.mark.docker
USERS = {"ci": "s3cret-for-tests"}


def _context(docker_host: str, address: str, base_image: str = "xpukit-base:bookworm-slim") -> settings.Context:
    flags = {"profile": "cpu", "registry": f"{address}/team", "base_image": base_image}
    return settings.make_context(flags, None, {"DOCKER_HOST": docker_host, "XPUKIT_CA_BUNDLE": "none"})


def test_engine_b_runs_the_demo_from_engine_a_push_without_building(
    docker_client, test_image, tmp_path, monkeypatch, capfd
):
    password = tmp_path / "password"
    password.write_text(USERS["ci"])
    monkeypatch.setenv("XPUKIT_REGISTRY_USER", "ci")
    monkeypatch.setenv("XPUKIT_REGISTRY_PASSWORD_FILE", str(password))
    lock = tmp_path / "images.toml"
    with registry(tmp_path / "registry", USERS) as address:
        # Each context owns its engine (one SDK client per task); the plan and the sharing
        # functions take it from there.
        a = _context(os.environ.get("DOCKER_HOST", ""), address)
        try:
            plan_a = make_plan(a)
            if plan_a.tag != test_image:
                pytest.skip(f"this checkout's content tag {plan_a.tag} is not the tested image {test_image}")
            digest = sharing.push(a, plan_a, lock)
        finally:
            a.close()
        entry = reg.read_lock(lock)["cpu"]
        assert entry.digest == digest and entry.tag == test_image.split(":")[1]
        assert entry.base == plan_a.base == "xpukit-base:bookworm-slim"
        assert entry.base_id == docker_client.images.get(plan_a.base).id  # the base by content too
        monkeypatch.setattr(reg, "LOCK_PATH", lock)  # the lock B's plan reads the shared base from

        with second_engine(tmp_path / "engine-b") as host_b:
            # B has no base and no base setting: the tag takes the base the lock records.
            b = _context(host_b, address, base_image="")
            try:
                plan_b = make_plan(b, base_required=False)
                assert plan_b.tag == plan_a.tag and plan_b.base_missing
                capfd.readouterr()
                ensure_image(plan_b, b.engine, functools.partial(sharing.shared_image, b, plan_b, lock))
                said = capfd.readouterr().out
                assert "pulled" in said and "building" not in said
                image = b.engine.client().images.get(plan_b.tag)
                assert f"{entry.repository}@{digest}" in image.attrs["RepoDigests"]
                code = b.engine.run(
                    plan_b.tag, ["python", "examples/xpu_triton_ur.py", "--n", "5000"],
                    containers.container_options(b),
                )  # fmt: skip
                assert code == 0
                assert "OK" in capfd.readouterr().out
            finally:
                b.close()
