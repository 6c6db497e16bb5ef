"""Bit-for-bit reproducible builds: `invoke verify` and the parts it is made of.

The unit tests compare real tar layers and real git commits. The podman tests work in copies of
this checkout: `invoke verify --against rebuild` builds twice from nothing in two empty podman
stores (the IDs must be equal); the first rebuild, pushed to a real registry with a password, must
get the manifest digest verify printed for it, and `verify --against lock` (a lock in the copy)
fetches it and compares a third rebuild; a copy whose Dockerfile writes the build time must fail
verify, naming that file. Five cold builds in all (~2-4 min each here), and two verify runs stopped
by a signal in their first build step (~15 s each).
"""

from __future__ import annotations

import io
import tarfile

import pytest

from tests.support.verify import _git
from xpukit import layout
from xpukit.errors import XpukitError
from xpukit.host import build_cli
from xpukit.host.image import build
from xpukit.host.verify import compare as compare_mod
from xpukit.host.verify import rebuild as verify_mod
from xpukit.host.versions import pins

ROOT = layout.REPO_ROOT


def _layer(files: dict[str, tuple[bytes, int]]) -> tarfile.TarFile:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, (data, mtime) in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), mtime, 0o644
            tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    return tarfile.open(fileobj=buf)


@pytest.mark.unit
def test_differing_files_name_each_path_and_how():
    ref = compare_mod.index_layer(_layer({"a": (b"same", 1), "b": (b"old", 1), "c": (b"x", 1), "d": (b"y", 5)}))
    new = compare_mod.index_layer(_layer({"a": (b"same", 1), "b": (b"new!", 1), "d": (b"y", 6), "e": (b"z", 1)}))
    found = dict(compare_mod.differing_files(ref, new))
    assert found == {
        "b": "content (3 vs 4 bytes)",
        "c": "only in the reference",
        "d": "mtime 5 vs 6",
        "e": "only in the rebuild",
    }


@pytest.mark.unit
def test_layers_are_named_by_their_dockerfile_step():
    """buildah's history wording, as podman 4.3 writes it (the build args of a RUN come first)."""
    run = "|42 APT_PACKAGES=python3=3.11.2-1+b1 BASE_IMAGE=xpukit-base:bookworm /bin/sh -c date +%s%N > /opt/built-at"
    assert compare_mod.describe_step(run) == "RUN date +%s%N > /opt/built-at"
    copy = (
        "/bin/sh -c #(nop) COPY dir:fef9000b988816f75241d730daca1af9452dc19b2e75626a4c9d42275290b3e7 in /opt/xpukit/src"
    )
    assert compare_mod.describe_step(copy).startswith("COPY dir:fef9000b")
    assert len(compare_mod.describe_step(copy, limit=40)) == 40
    assert compare_mod.describe_step("") == "(step unknown)"


@pytest.mark.unit
def test_config_differences_skip_the_layers():
    ref = {"created": "1", "config": {"Labels": {"a": "1"}, "Env": ["X=1"]}, "rootfs": {"diff_ids": ["x"]}}
    new = {"created": "2", "config": {"Labels": {"a": "2"}, "Env": ["X=1"]}, "rootfs": {"diff_ids": ["y"]}}
    assert compare_mod.config_differences(ref, new) == ["config.Labels", "created"]


@pytest.mark.unit
def test_source_date_is_the_commit_time_not_the_clock(tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / "f").write_text("1\n")
    _git(tmp_path, "add", "f")
    _git(tmp_path, "commit", "-q", "-m", "one")
    date = build.source_date(tmp_path, environ={})
    assert date.epoch == "1000000000" and "uncommitted" not in date.origin
    (tmp_path / "f").write_text("2\n")  # a dirty tree keeps its commit's time, and says so
    date = build.source_date(tmp_path, environ={})
    assert date.epoch == "1000000000" and "uncommitted changes" in date.origin
    assert build.source_date(tmp_path, environ={"SOURCE_DATE_EPOCH": "42"}).epoch == "42"
    with pytest.raises(XpukitError, match="not a number"):
        build.source_date(tmp_path, environ={"SOURCE_DATE_EPOCH": "yesterday"})
    assert build.source_date(tmp_path / "nowhere", environ={}).epoch == ""


@pytest.mark.unit
def test_podman_builds_take_the_commit_time_and_docker_says_it_cannot():
    profile = pins.load().profile("cpu")
    podman = build_cli.BuildCli("/usr/bin/podman", "4.3.1", kind="podman")
    docker = build_cli.BuildCli("/usr/bin/docker", "20.10.24")
    epoch = build.source_date(ROOT).epoch
    on_podman = build.plan(ROOT, profile, "xpukit-base:bookworm-slim", "xpukit", podman)
    on_docker = build.plan(ROOT, profile, "xpukit-base:bookworm-slim", "xpukit", docker)
    assert on_podman.command[on_podman.command.index("--timestamp") + 1] == epoch
    assert on_podman.reproducible.startswith(f"build: reproducible: files and image dated SOURCE_DATE_EPOCH={epoch}")
    assert "--timestamp" not in on_docker.command
    assert "not bit-for-bit reproducible" in on_docker.reproducible
    assert on_podman.tags == on_docker.tags  # the content tag names the inputs on every engine


SNAPSHOT = "http://snapshot.debian.org/archive/debian/20261201T000000Z"


@pytest.mark.unit
def test_rebuild_command_uses_its_own_store_and_no_cache(tmp_path):
    from types import SimpleNamespace

    profile = pins.load().profile("cpu")
    podman = build_cli.BuildCli("/usr/bin/podman", "4.3.1", kind="podman")
    image_plan = SimpleNamespace(profile=profile, base="xpukit-base:bookworm-slim")
    ctx = SimpleNamespace(
        settings=SimpleNamespace(image="xpukit", build_network="host", ocloc_mirror=SNAPSHOT),
        once=lambda _key, _make: SimpleNamespace(path=""),
    )
    store = verify_mod.Store(podman.path, tmp_path / "store")
    cmd = store.wrap(verify_mod.rebuild_command(image_plan, podman.path, tmp_path / "ctx", "xpukit-verify:t", ctx))
    assert cmd[:7] == [podman.path, "--root", f"{tmp_path}/store/graph", "--runroot", f"{tmp_path}/store/run",
                       "--storage-driver", "overlay"]  # fmt: skip
    assert "--layers" in cmd and "--timestamp" in cmd  # as `invoke build` on podman, in an empty store
    assert cmd[cmd.index("-f") + 1] == f"{tmp_path}/ctx/Dockerfile" and cmd[-1] == str(tmp_path / "ctx")
    assert [cmd[i + 1] for i, part in enumerate(cmd) if part == "-t"] == ["xpukit-verify:t"]
    assert store.env == {"TMPDIR": f"{tmp_path}/store/tmp"}  # buildah's cache mounts live there
    # The compiler's mirror setting reaches the rebuild, as it reached the build it checks.
    assert f"OCLOC_MIRROR={SNAPSHOT}" in cmd
    # Everything else is the build's own command, made from the plan by name, not edited.
    built = build.plan(
        ROOT,
        profile,
        "xpukit-base:bookworm-slim",
        "xpukit",
        podman,
        network="host",
        progress="plain",
        ocloc_mirror=SNAPSHOT,
    )

    def without_place(command):  # the Dockerfile, the tags and the context differ on purpose
        parts, out = list(command[:-1]), []
        while parts:
            part = parts.pop(0)
            if part in ("-f", "-t"):
                parts.pop(0)
            else:
                out.append(part)
        return out

    assert without_place(cmd[7:]) == without_place(built.command[1:])


class _FakeImages:
    """An engine's images by reference: each with its history (newest first, as the Docker API gives)."""

    def __init__(self, histories: dict[str, list[int]]) -> None:
        self.histories = histories

    def get(self, ref: str):
        from types import SimpleNamespace

        import docker

        if ref not in self.histories:
            raise docker.errors.ImageNotFound(ref)
        dates = self.histories[ref]
        return SimpleNamespace(id=f"sha256:{len(dates):064d}", history=lambda: [{"Created": d} for d in dates])


@pytest.mark.unit
def test_the_local_image_counts_as_a_cold_build_only_when_every_layer_above_the_base_has_this_date():
    from types import SimpleNamespace

    base = [1700000000]
    sdk = SimpleNamespace(images=_FakeImages({"base": base, "cold": [1800000000] * 5 + base,
                                              "warm": [1800000000] * 3 + [1790000000] * 2 + base}))  # fmt: skip
    assert verify_mod.local_is_whole(sdk, "cold", "base", "1800000000") == ""
    why = verify_mod.local_is_whole(sdk, "warm", "base", "1800000000")
    assert "reuses layers built at another commit (dated 1790000000, not 1800000000)" in why
    assert "invoke clean --build-cache" in why
    assert "no SOURCE_DATE_EPOCH" in verify_mod.local_is_whole(sdk, "cold", "base", "")


@pytest.mark.unit
@pytest.mark.parametrize(
    ("kind", "image", "expected"),
    [
        ("podman", "cold", "the local image xpukit:cpu-test"),
        ("podman", "warm", "a second rebuild from nothing"),
        ("podman", None, "a second rebuild from nothing"),
        ("docker", "cold", "a second rebuild from nothing"),  # Docker's builder is never reproducible
    ],
)
def test_auto_compares_with_the_local_image_when_podman_built_it_cold_at_this_commit(
    monkeypatch, tmp_path, kind, image, expected
):
    from types import SimpleNamespace

    monkeypatch.setattr(build, "source_date", lambda _root: build.SourceDate("1800000000", "test"))
    base = [1700000000]
    local = {"cold": [1800000000] * 4 + base, "warm": [1800000000, 1790000000, *base]}
    histories = {"xpukit-base:bookworm-slim": base, **({"xpukit:cpu-test": local[image]} if image else {})}
    sdk = SimpleNamespace(images=_FakeImages(histories))
    plan = SimpleNamespace(
        tag="xpukit:cpu-test",
        base="xpukit-base:bookworm-slim",
        profile=pins.load().profile("cpu"),
        locked=None,
    )
    said: list[str] = []
    ctx = SimpleNamespace(engine=SimpleNamespace(kind=kind))
    described, export = verify_mod._reference("auto", ctx, plan, sdk, tmp_path, said.append)
    assert described == expected
    assert (export is None) == (expected == "a second rebuild from nothing")
    if image == "warm":
        assert any("not comparing with the local image xpukit:cpu-test: it reuses layers" in s for s in said)


# ------------------------------------------------------------------ for real, on podman
