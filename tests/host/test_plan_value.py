"""The plan as a value: what a dry run prints is exactly what the real run executes.

The tests that run on the host, with no engine; the others are in tests/engine/test_plan_value.py.
"""

from __future__ import annotations

import types

import pytest

from tests.support.invoke import invoke_unrecorded
from xpukit import layout
from xpukit.host import build_cli, engine, settings
from xpukit.host.image import build
from xpukit.host.versions import pins

ROOT = layout.REPO_ROOT


@pytest.mark.unit
def test_a_build_plan_cannot_be_edited_after_it_is_made():
    """Everything that adds to the command (engine env, cache source) goes in before the plan exists."""
    profile = pins.load().profile("cpu")
    cli = build_cli.BuildCli("/usr/bin/docker", "20.10.24")
    plan = build.plan(
        ROOT,
        profile,
        "xpukit-base:bookworm-slim",
        "xpukit",
        cli,
        engine_env={"DOCKER_HOST": "unix:///x.sock"},
        cache=lambda tag: build.CacheSource(True, f"reg.example:5000/team/xpukit:{tag}"),
    )
    assert isinstance(plan.command, tuple) and isinstance(plan.env, types.MappingProxyType)
    assert isinstance(plan.args, types.MappingProxyType)
    with pytest.raises(TypeError):
        plan.env["DOCKER_HOST"] = "elsewhere"  # type: ignore[index]
    with pytest.raises(AttributeError):
        plan.command.append("--no-cache")  # type: ignore[attr-defined]
    content = plan.tags[0].rsplit("-", 1)[1]
    assert plan.command[plan.command.index("--cache-from") + 1] == f"reg.example:5000/team/xpukit:{content}"
    assert "BUILDKIT_INLINE_CACHE=1" in plan.command and plan.command[-1] == str(ROOT)
    assert plan.env == {"DOCKER_BUILDKIT": "1", "DOCKER_HOST": "unix:///x.sock"}
    assert plan.printable().startswith("DOCKER_BUILDKIT=1 DOCKER_HOST=unix:///x.sock /usr/bin/docker build ")
    # A caller's list or dict is copied in, so editing it later changes nothing.
    command, env = ["docker", "build", "."], {"A": "1"}
    made = build.BuildPlan("cpu", ("x:1",), {}, command, env, ())
    command.append("--pull")
    env["B"] = "2"
    assert made.command == ("docker", "build", ".") and dict(made.env) == {"A": "1"}


@pytest.mark.unit
def test_the_dpnp_layer_is_its_own_stage_and_tag_after_the_same_image():
    """--with dpnp targets the stage after runtime with the same build args (so the default image's
    layers are shared) and tags xpukit:cpu-dpnp; a layer of another profile is refused."""
    profile = pins.load().profile("cpu")
    cli = build_cli.BuildCli("/usr/bin/docker", "20.10.24")
    plain = build.plan(ROOT, profile, "xpukit-base:bookworm-slim", "xpukit", cli)
    layered = build.plan(ROOT, profile, "xpukit-base:bookworm-slim", "xpukit", cli, variant=build.Variant(layer="dpnp"))
    assert plain.command[plain.command.index("--target") + 1] == "runtime"
    assert layered.command[layered.command.index("--target") + 1] == "dpnp"
    assert dict(layered.args) == dict(plain.args)
    content = plain.tags[0].rsplit("-", 1)[1]
    assert layered.tags == (f"xpukit:cpu-dpnp-{content}", "xpukit:cpu-dpnp")
    with pytest.raises(build.XpukitError, match="not a layer of the xpu profile"):
        build.plan(ROOT, pins.load().profile("xpu"), "b", "xpukit", cli, variant=build.Variant(layer="dpnp"))
    with pytest.raises(settings.UsageError, match="unknown layer 'nope' for --with"):
        settings.resolve({"layer": "nope"}, environ={})


@pytest.mark.unit
def test_a_stale_lock_fails_the_dry_run_first_with_one_line(tmp_path):
    """The lock check needs no network: it runs before the engine is asked, in a dry run too."""
    stale = tmp_path / "pins.toml"
    text = pins.DEFAULT_PINS.read_text()
    assert 'numpy = "2.4.6"' in text
    stale.write_text(text.replace('numpy = "2.4.6"', 'numpy = "2.4.5"', 1))
    env = {"XPUKIT_PINS_FILE": str(stale), "XPUKIT_ENGINE": "docker"}
    for task in (["build"], ["test", "--where", "container"]):
        result = invoke_unrecorded(*task, "--profile", "cpu", "--dry-run", env=env)
        assert result.returncode != 0 and "Traceback" not in result.stderr + result.stdout
        errors = [line for line in result.stderr.splitlines() if "error:" in line]
        assert len(errors) == 1, result.stderr
        assert "env/lock/cpu.txt does not match env/pins.toml (numpy: pins say 2.4.5, lock has 2.4.6)" in errors[0]
        assert "invoke pins --lock" in errors[0]
        assert "base:" not in result.stdout  # before any engine was asked which base a build uses


@pytest.mark.unit
def test_the_engine_is_one_object_per_task_with_an_explicit_absent_state(tmp_path):
    """No engine answers: a dry run plans without one (absent, said why), a real run refuses."""
    ctx = settings.make_context(
        {"dry_run": True}, None, {"DOCKER_HOST": f"unix://{tmp_path}/none.sock", "XPUKIT_ENGINE": "docker"}
    )
    eng = ctx.engine
    assert ctx.engine is eng and not eng.present
    assert eng.connect_if_present() is False and not eng.present
    assert "no Docker engine answers" in eng.absent_reason
    with pytest.raises(engine.EngineError, match="no Docker engine answers"):
        eng.client()
    ctx.close()
    ctx.close()  # closed once; a second close does nothing


@pytest.mark.unit
def test_a_plan_reads_the_commit_once(monkeypatch):
    """The labels (revision, time) and SOURCE_DATE_EPOCH both come from one git log and one git
    status; with the origin's git config, three git processes per plan (there were five)."""
    asked: list[str] = []
    real = build.git

    def counted(root, *args):
        asked.append(args[0])
        return real(root, *args)

    monkeypatch.setattr(build, "git", counted)
    plan = build.plan(ROOT, pins.load().profile("cpu"), "xpukit-base:bookworm-slim", "xpukit", None)
    committed = plan.args["XPUKIT_REVISION"] != "unknown"
    assert sorted(asked) == sorted(["log", "config", *(["status"] if committed else [])])
    assert plan.args["XPUKIT_REVISION"].removesuffix("-dirty") == real(ROOT, "log", "-1", "--format=%H")
    assert plan.reproducible
