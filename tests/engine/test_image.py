"""The built image, through a real Docker engine: labels, manifest, user, secrets, layer reuse.

These run on the host against the image `invoke test` built (XPUKIT_TEST_IMAGE).
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.support.image_checks import needles_in_stream
from xpukit import layout
from xpukit.host import build_cli
from xpukit.host.image import build
from xpukit.host.versions import pins

pytestmark = pytest.mark.docker
ROOT = layout.REPO_ROOT


def run_in(docker_client, image: str, command: list[str]) -> str:
    out = docker_client.containers.run(image, command, remove=True)
    return out.decode()


@pytest.fixture(scope="module")
def image_labels(docker_client, test_image) -> dict[str, str]:
    return dict(docker_client.images.get(test_image).labels)


@pytest.fixture(scope="module")
def profile(image_labels) -> pins.Profile:
    return pins.load().profile(image_labels["io.xpukit.profile"])


@pytest.fixture(scope="module")
def manifest(docker_client, test_image) -> dict:
    return json.loads(run_in(docker_client, test_image, ["cat", "/opt/xpukit/manifest.json"]))


@pytest.mark.sharing_smoke
def test_labels_equal_the_pins(image_labels, profile):
    args = build.build_args(profile, image_labels["org.opencontainers.image.base.name"])
    assert image_labels["io.xpukit.pins.python"] == args["PYTHON_VERSION"]
    assert image_labels["io.xpukit.pins.ocloc"] == f"{args['OCLOC_PACKAGE']}={args['OCLOC_VERSION']}"
    assert (
        image_labels["io.xpukit.pins.triton"]
        == f"{args['TRITON_SOURCE']}:{args['TRITON_VERSION']}{args['TRITON_COMMIT']}"
    )
    assert image_labels["io.xpukit.pins.ur"] == f"{args['UR_SOURCE']}:{args['UR_VERSION']}"
    assert image_labels["io.xpukit.pins.pypi"] == args["PYPI_PINS"]
    assert image_labels["io.xpukit.pins.digest"] == profile.fingerprint()
    for key in ("revision", "created"):
        assert image_labels[f"org.opencontainers.image.{key}"], key
    # The checkout's origin remote, or no label at all where it has none (never a guessed address).
    # Engine B (.ci/engine_b.py) runs this in a copy without .git, where the image's remote cannot
    # be read back: there the label is checked by the run on engine A that built the image.
    if (layout.REPO_ROOT / ".git").exists():
        assert image_labels.get("org.opencontainers.image.source", "") == build.source_url(layout.REPO_ROOT)


@pytest.mark.sharing_smoke
def test_manifest_reports_what_is_installed_and_it_equals_the_pins(manifest, profile):
    assert manifest["profile"] == profile.name
    if profile["python"]:
        assert manifest["python"] == profile["python"]
    assert manifest["ocloc"]["path"] and manifest["ocloc"]["version"]
    if profile["ocloc"]["version"]:
        assert manifest["ocloc"]["package_version"] == profile["ocloc"]["version"]
        # ocloc's own answer (26.27.039122) names the package version's first three numbers (26.27.39122.14-1).
        assert [int(n) for n in manifest["ocloc"]["version"].split(".")[:3]] == [
            int(n) for n in profile["ocloc"]["version"].split(".")[:3]
        ]
    if profile["ocloc"]["source"] == "debian-folder":
        debs = profile["ocloc"]["debs"]
        assert manifest["ocloc"]["packages"] == {name: deb["version"] for name, deb in debs.items()}
        assert manifest["ocloc"]["igc"].split("+")[0] == debs["libigc2"]["version"].split("-")[0]
    if profile["triton"]["source"] == "pypi":
        assert manifest["triton"] == profile["triton"]["version"]
    if profile["ur"]["source"] == "pypi":
        assert manifest["ur_loader"]["release"] == profile["ur"]["version"]
        assert manifest["ur_loader"]["path"].startswith("/opt/xpukit/venv/lib/libur_loader.so")
        assert manifest["ur_loader"]["source"] == "pip" and manifest["ur_loader"]["api_version"].startswith("0.")
    assert manifest["numpy"] == profile["pypi"]["numpy"]


@pytest.mark.sharing_smoke
def test_runs_as_a_non_root_user(docker_client, test_image):
    uid, user = run_in(docker_client, test_image, ["sh", "-c", "id -u; id -un"]).split()
    assert uid != "0" and user == "xpukit"


def _bundle() -> Path:
    """The CA bundle this `invoke test` run's build trusted (XPUKIT_TEST_CA_BUNDLE, set by the kit)."""
    value = os.environ.get("XPUKIT_TEST_CA_BUNDLE", "")
    if not value:
        if os.environ.get("XPUKIT_REQUIRE_DOCKER") == "1":
            pytest.fail("XPUKIT_REQUIRE_DOCKER=1 but the build trusted no CA bundle (--ca-bundle none?)")
        pytest.skip("the build trusted no CA bundle in this run (--ca-bundle none, or run through `invoke test`)")
    return Path(value)


@pytest.mark.sharing_smoke
def test_ca_bundle_never_lands_in_the_image(docker_client, test_image):
    """The bundle the build trusted is in no layer of `docker save` (which holds the config: labels,
    history), not in `docker history` and in no label. CI (.ci/run) gives no --ca-bundle: it points
    SSL_CERT_FILE at the host bundle plus a canary line, and XPUKIT_EXPECT_CA_CANARY names the canary
    the default (auto) must have picked up."""
    bundle = _bundle().read_bytes()
    expected = os.environ.get("XPUKIT_EXPECT_CA_CANARY", "")
    if expected:
        assert expected.encode() in bundle, f"the default CA bundle {_bundle()} is not the one with {expected}"
    needles = [bundle]
    needles += [line.encode() for line in bundle.decode(errors="ignore").splitlines() if "xpukit-canary" in line]
    image = docker_client.images.get(test_image)
    found = needles_in_stream(image.save(chunk_size=8 << 20), needles)
    assert not found, f"CA bundle bytes found in {test_image}"
    history = json.dumps(docker_client.api.history(test_image))
    labels = json.dumps(image.labels)
    for needle in needles:
        text = needle.decode(errors="ignore")[:200]
        assert text not in history and text not in labels


def test_ca_secret_consumed_by_a_fresh_build_leaves_no_trace(docker_client, tmp_path, image_labels, profile):
    """Rebuild the system stage with no cache and a bundle carrying a unique canary line: the
    secret is really mounted (apt runs), and the canary shows up in no layer and no history."""
    canary = f"# xpukit-canary-{uuid.uuid4().hex}"
    bundle = tmp_path / "bundle.pem"
    source = os.environ.get("XPUKIT_TEST_CA_BUNDLE", "")
    bundle.write_text((Path(source).read_text() if source else "") + f"\n{canary}\n")
    cli = build_cli.pick_cli(os.environ.get("XPUKIT_DOCKER_CLI", "auto"))
    tag = f"xpukit-test:canary-{uuid.uuid4().hex[:8]}"
    plan = build.plan(
        ROOT,
        profile,
        image_labels["org.opencontainers.image.base.name"],
        "xpukit-test",
        cli,
        ca_bundle=str(bundle),
        progress="plain",
    )
    cmd = [a if a != "runtime" else "system" for a in plan.command]
    cmd = [*cmd[:-1], "--no-cache", "-t", tag, cmd[-1]]
    result = subprocess.run(cmd, env={**os.environ, **plan.env}, capture_output=True, text=True, check=False)
    try:
        assert result.returncode == 0, result.stderr[-2000:]
        assert "install-apt.sh" in result.stderr + result.stdout  # the step that mounts the secret ran
        found = needles_in_stream(docker_client.images.get(tag).save(chunk_size=8 << 20), [canary.encode()])
        assert not found
        assert canary not in json.dumps(docker_client.api.history(tag))
    finally:
        for t in (tag, *plan.tags):
            if t.startswith("xpukit-test:"):
                subprocess.run([cli.path, "rmi", "-f", t], capture_output=True, check=False)


def _steps(log: str) -> dict[str, str]:
    """BuildKit's plain-progress log grouped by step: {"#7": "all lines of step 7"}."""
    steps: dict[str, str] = {}
    for line in log.splitlines():
        number, _, rest = line.partition(" ")
        if number.startswith("#") and number[1:].isdigit():
            steps[number] = steps.get(number, "") + rest + "\n"
    return steps


def test_editing_an_example_reuses_every_dependency_layer(docker_client, tmp_path, test_image, image_labels, profile):
    context = build.copy_context(ROOT, tmp_path / "ctx")
    example = sorted((context / "examples").glob("*.py"))[0]
    # A unique edit: BuildKit would otherwise reuse the COPY from an earlier run of this test.
    example.write_text(example.read_text() + f"\n# edited by a layer-reuse test: {uuid.uuid4().hex}\n")
    cli = build_cli.pick_cli(os.environ.get("XPUKIT_DOCKER_CLI", "auto"))
    plan = build.plan(
        context,
        profile,
        image_labels["org.opencontainers.image.base.name"],
        "xpukit-test",
        cli,
        ca_bundle=os.environ.get("XPUKIT_TEST_CA_BUNDLE", ""),
        progress="plain",
    )
    result = subprocess.run(plan.command, env={**os.environ, **plan.env}, capture_output=True, text=True, check=False)
    try:
        assert result.returncode == 0, result.stderr[-2000:]
        steps = _steps(result.stderr + result.stdout)
        dependency_steps = [
            t
            for t in steps.values()
            if any(key in t.splitlines()[0] for key in ("install-apt.sh", "install-python.sh", "COPY env/lock"))
        ]
        assert len(dependency_steps) >= 3, steps
        for text in dependency_steps:
            assert "CACHED" in text, f"rebuilt: {text.splitlines()[0]}"
        examples_step = next(t for t in steps.values() if t.startswith("[runtime") and "COPY examples" in t)
        assert "CACHED" not in examples_step
        # The dependency layers are byte-for-byte the same layers.
        before = docker_client.images.get(test_image).attrs["RootFS"]["Layers"]
        after = docker_client.images.get(plan.tags[0]).attrs["RootFS"]["Layers"]
        common = next((i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b), len(before))
        assert 0 < common < len(before)
    finally:
        for t in plan.tags:
            subprocess.run([cli.path, "rmi", "-f", t], capture_output=True, check=False)


def test_absent_base_that_cannot_be_pulled_points_to_invoke_base(docker_client):
    """A real engine asked to build FROM an image it does not have and cannot pull."""
    import sys

    missing = f"xpukit-test/absent-{uuid.uuid4().hex[:8]}:1"
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    result = subprocess.run(
        [sys.executable, "-m", "invoke", "build", "--profile", "cpu", "--base-image", missing],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode != 0 and "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and f"base image {missing} is not present and cannot be pulled" in errors[0]
    assert "invoke base" in errors[0]
