"""`invoke verify`: rebuild the image from nothing in an empty podman store and compare it, bit for bit.

The rebuild runs in a podman store of its own (graph root, run root and TMPDIR in a temporary
folder: no layer cache, no cache mounts, no wheelhouse), from a snapshot of the build context, with
the build's SOURCE_DATE_EPOCH (``buildah --timestamp``). Its image ID (the digest of its config) is
compared with a reference:

- ``local``: the image with this checkout's content tag on the engine;
- ``lock``: the image env/lock/images.toml records (fetched from its registry with skopeo);
- ``rebuild``: a second build from nothing in a second empty store.

``auto`` takes the local image when podman built it whole at this commit (every layer above the base
dated by this SOURCE_DATE_EPOCH: a cold build, no layer reused from an earlier commit), else the
lock's image of the same content tag, else a second rebuild.

Equal: "reproducible: sha256:..." and the manifest digest the rebuild gets when pushed with the
kit's fixed compression (gzip at its default level, OCI manifest: what ``podman push`` sends by
default), compared with the lock's digest under ``lock``. Different: which
layers differ (with the Dockerfile step that made each), which files in them differ and how
(``diffoscope`` on those files), exit 1.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from xpukit.errors import UsageError, XpukitError
from xpukit.host import build_cli, engine, processes, ui
from xpukit.host import podman as podman_mod
from xpukit.host.image import build as build_mod
from xpukit.host.image import registry, trust
from xpukit.host.image.plan import ImagePlan
from xpukit.host.settings import Context
from xpukit.host.verify.compare import Image, compare, config_bytes, read_archive
from xpukit.layout import REPO_ROOT

if TYPE_CHECKING:
    from docker import DockerClient

AGAINST = ("auto", "local", "lock", "rebuild")
VERIFY_REPO = "xpukit-verify"
# The compression a push gets: podman's default (gzip, default level) named, so that the manifest
# digest does not depend on the layers' compression in the store; --compress because the dir:
# transport would otherwise store them uncompressed.
PUSH_COMPRESSION = ("--format", "oci", "--compress", "--compression-format", "gzip")


class Store:
    """A podman store of its own under ``folder``: nothing cached, nothing shared with the machine's."""

    def __init__(self, podman: str, folder: Path) -> None:
        self.podman, self.folder = podman, folder
        for sub in ("graph", "run", "tmp"):
            (folder / sub).mkdir(parents=True, exist_ok=True)

    def cmd(self, *args: str) -> list[str]:
        return [
            self.podman,
            "--root",
            str(self.folder / "graph"),
            "--runroot",
            str(self.folder / "run"),
            "--storage-driver",
            "overlay",
            *args,
        ]

    @property
    def env(self) -> dict[str, str]:
        # buildah keeps RUN --mount=type=cache folders under TMPDIR: an empty one means no cache mounts.
        return {"TMPDIR": str(self.folder / "tmp")}

    def wrap(self, cmd: list[str]) -> list[str]:
        """A podman command line, run in this store."""
        return [*self.cmd(), *cmd[1:]]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.cmd(*args), env={**os.environ, **self.env}, capture_output=True, text=True, check=False
        )

    def image_id(self, ref: str) -> str:
        out = self.run("image", "inspect", "--format", "{{.Id}}", ref)
        if out.returncode != 0:
            raise XpukitError(f"the rebuilt image {ref} is not in its store ({out.stderr.strip()[:120]})", "rerun")
        return "sha256:" + out.stdout.strip().removeprefix("sha256:")

    def save(self, ref: str, out: Path) -> Path:
        saved = self.run("save", "--format", "docker-archive", "-o", str(out), ref)
        if saved.returncode != 0:
            raise XpukitError(f"podman save {ref} failed: {saved.stderr.strip()[:160]}", "check the disk space")
        return out

    def pushed_digest(self, ref: str, out: Path) -> str:
        """The manifest digest ``ref`` gets when pushed with the kit's fixed compression: ``podman
        push`` writes the same manifest bytes into a ``dir:`` as into a registry (gzip, OCI)."""
        pushed = self.run("push", "-q", *PUSH_COMPRESSION, ref, f"dir:{out}")
        if pushed.returncode != 0:
            raise XpukitError(
                f"podman push {ref} to {out} failed: {pushed.stderr.strip()[:160]}", "check the disk space"
            )
        return "sha256:" + hashlib.sha256((out / "manifest.json").read_bytes()).hexdigest()

    def remove(self) -> None:
        self.run("rmi", "-af")
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
        for mount in sorted((m for m in mounts if m.startswith(str(self.folder))), key=len, reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True, check=False)
        shutil.rmtree(self.folder, ignore_errors=True)


def _load_base(sdk: DockerClient, base: str, store: Store, work: Path, say: Callable[[str], None]) -> str:
    """The engine's base image, copied into ``store`` by content; returns its image ID."""
    try:
        image = sdk.images.get(base)
    except Exception as exc:
        raise XpukitError(
            f"base {base} is not on the engine ({engine.short_reason(exc)})", "build it with `invoke base`"
        ) from None
    archive = work / "base.tar"
    with open(archive, "wb") as f:
        for chunk in image.save(chunk_size=8 << 20, named=True):
            f.write(chunk)
    loaded = store.run("load", "-q", "-i", str(archive))
    if loaded.returncode != 0:
        raise XpukitError(f"loading the base into the empty store failed: {loaded.stderr.strip()[:160]}", "rerun")
    archive.unlink()
    if store.image_id(base) != image.id:
        raise XpukitError(
            f"the base {base} changed its ID on the way to the empty store ({str(image.id)[:19]})",
            "report this: the engine re-encoded the image",
        )
    say(f"verify: base {base} = {image.id} (the rebuild starts FROM exactly this)")
    return str(image.id)


def rebuild_command(image_plan: ImagePlan, podman: str, context: Path, tag: str, ctx: Context) -> list[str]:
    """The podman build of this plan from the snapshot ``context``, computed once per verify (the
    commit time and labels of a checkout that moves meanwhile must not differ between the builds);
    :meth:`Store.wrap` points it at a store."""
    cli = build_cli.BuildCli(podman, "", kind="podman")
    plan = build_mod.plan(
        REPO_ROOT,
        image_plan.profile,
        base_image=image_plan.base,
        image=ctx.settings.image,
        cli=cli,
        ca_bundle=trust.ca_bundle(ctx).path,
        progress="plain",
        network=ctx.settings.build_network,
        context=context,
        only_tag=tag,
        ocloc_mirror=ctx.settings.ocloc_mirror,
    )
    if not any(part == "--timestamp" for part in plan.command):
        raise XpukitError(
            f"no SOURCE_DATE_EPOCH for the rebuild ({build_mod.source_date(REPO_ROOT).origin})",
            "verify a git checkout, or set SOURCE_DATE_EPOCH",
        )
    # --layers stays: an empty store has nothing to reuse, and the layers must be made exactly as
    # `invoke build` makes them (buildah leaves other mount points in a layer under --no-cache).
    return list(plan.command)


def _build(store: Store, cmd: list[str], label: str, say: Callable[[str], None]) -> None:
    say(f"verify: {label}: building from nothing in {store.folder} (an empty podman store and TMPDIR)")
    started = time.monotonic()
    code, _tail = processes.stream_keeping_tail(cmd, store.env)
    if code != 0:
        raise XpukitError(f"verify: {label}: the build failed (exit {code}); its log is above", "fix the failing step")
    say(f"verify: {label}: built in {time.monotonic() - started:.0f} s")


def skopeo_auth(registry_host: str, work: Path) -> list[str]:
    """skopeo's source credentials from XPUKIT_REGISTRY_USER/_PASSWORD_FILE, as an auth file
    (0600, in verify's temporary folder) rather than on the command line; [] without them."""
    creds = registry.credentials()
    if creds is None:
        return []
    token = base64.b64encode(f"{creds['username']}:{creds['password']}".encode()).decode()
    path = work / "auth.json"
    path.touch(mode=0o600)
    path.write_text(json.dumps({"auths": {registry_host: {"auth": token}}}))
    return ["--src-authfile", str(path)]


def local_is_whole(sdk: DockerClient, tag: str, base: str, epoch: str) -> str:
    """Empty when every history entry the local image ``tag`` adds to ``base`` is dated ``epoch`` (buildah
    --timestamp dates the history too: one build of this commit, no layer reused from an earlier one),
    else why it is not; a warm store's older layers differ from a cold build in their dates only
    (docs/reproducible.md, "Layer cache")."""
    if not epoch:
        return "no SOURCE_DATE_EPOCH to check its layers' dates against"
    try:
        own, under = sdk.images.get(tag).history(), sdk.images.get(base).history()
    except Exception as exc:
        return f"its history is unreadable ({engine.short_reason(exc)})"
    added = own[: max(len(own) - len(under), 0)]  # newest first, the base's entries last
    older = sorted({int(h.get("Created") or 0) for h in added} - {int(epoch)})
    if not added or older:
        return (
            f"it reuses layers built at another commit (dated {', '.join(map(str, older[:3])) or 'nothing'}, "
            f"not {epoch}); `invoke clean --build-cache` then `invoke build` makes the cold build"
        )
    return ""


def _reference(
    against: str, ctx: Context, image_plan: ImagePlan, sdk: DockerClient, work: Path, say: Callable[[str], None]
) -> tuple[str, Callable[[], Image] | None]:
    """(what the rebuild is compared with, a function that exports it; None = a second rebuild)."""
    entry = image_plan.locked  # the lock's entry, as the plan read it
    tag_part = image_plan.tag.rsplit(":", 1)[1]
    if against == "auto":
        if ctx.engine.kind == "podman" and engine.image_exists(sdk, image_plan.tag):
            why = local_is_whole(sdk, image_plan.tag, image_plan.base, build_mod.source_date(REPO_ROOT).epoch)
            if why:
                say(f"verify: not comparing with the local image {image_plan.tag}: {why}")
            else:
                against = "local"
        if against == "auto":
            against = "lock" if entry is not None and entry.same_content(tag_part) else "rebuild"
    if against == "local":
        if not engine.image_exists(sdk, image_plan.tag):
            raise XpukitError(
                f"no local image {image_plan.tag} to compare with", "build it (invoke build) or use --against rebuild"
            )
        if ctx.engine.kind != "podman":
            say(
                "verify: the local image was built by Docker, whose builder cannot be reproducible: expect a difference"
            )

        def export_local() -> Image:
            archive = work / "reference.tar"
            with open(archive, "wb") as f:
                for chunk in sdk.images.get(image_plan.tag).save(chunk_size=8 << 20, named=True):
                    f.write(chunk)
            image = read_archive(f"the local image {image_plan.tag}", archive)
            image.image_id = str(sdk.images.get(image_plan.tag).id)
            return image

        return f"the local image {image_plan.tag}", export_local
    if against == "lock":
        if entry is None:
            raise XpukitError(
                f"{registry.LOCK_PATH.name} records no {image_plan.profile.name} image", "use --against rebuild"
            )
        if not entry.same_content(tag_part):
            say(f"verify: warning: the lock's image ({entry.tag}) was built from other inputs than {tag_part}")
        ref = entry.reference

        def export_lock() -> Image:
            skopeo = shutil.which("skopeo")
            if skopeo is None:
                raise XpukitError("comparing with the lock's image needs skopeo", "apt-get install skopeo")
            archive = work / "reference.tar"
            tls = [] if not entry.registry.startswith(("127.0.0.1", "localhost")) else ["--src-tls-verify=false"]
            auth = skopeo_auth(entry.registry.split("/", 1)[0], work)
            copied = subprocess.run(
                [skopeo, "copy", "-q", *tls, *auth, f"docker://{ref}", f"docker-archive:{archive}"],
                capture_output=True,
                text=True,
                check=False,
            )
            if copied.returncode != 0:
                raise XpukitError(
                    f"fetching {ref} failed: {copied.stderr.strip()[:160]}", "check the registry (invoke pull)"
                )
            return read_archive(f"the pushed image {ref}", archive)

        return f"the pushed image {ref}", export_lock
    return "a second rebuild from nothing", None


def check_against(against: str) -> None:
    """A usage error (exit 2) unless ``against`` is one of :data:`AGAINST`."""
    if against not in AGAINST:
        raise UsageError(f"unknown --against {against!r}", f"use one of {', '.join(AGAINST)}")


def verify(ctx: Context, image_plan: ImagePlan, sdk: DockerClient, against: str = "auto", keep: bool = False) -> int:
    """Rebuild ``image_plan`` from nothing and compare; 0 when bit-for-bit identical, 1 otherwise."""
    check_against(against)
    podman = podman_mod.find_podman()
    if podman is None:
        raise XpukitError(
            "`invoke verify` rebuilds with podman (buildah --timestamp), which is missing", podman_mod.INSTALL_FIX
        )
    say = ui.say
    with _signals_stop_like_ctrl_c():
        work = Path(tempfile.mkdtemp(prefix="xpukit-verify-", dir="/var/tmp"))
        stores: list[Store] = []
        try:
            return _verify_in(ctx, image_plan, sdk, against, podman, work, stores, say)
        except KeyboardInterrupt as exc:
            name = exc.signal_name if isinstance(exc, Stopped) else "SIGINT"
            left = f"kept its stores in {work} (--keep)" if keep else f"removed its stores in {work}"
            raise Interrupted(f"verify stopped by {name}: {left}", 128 + signal.Signals[name].value) from None
        finally:
            # No second Ctrl-C or SIGTERM may leave the stores half removed.
            with _signals_ignored():
                if keep:
                    say(f"verify: kept the stores and archives in {work}")
                else:
                    for store in stores:
                        store.remove()
                    shutil.rmtree(work, ignore_errors=True)


class Stopped(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's KeyboardInterrupt is, so every step stops its child the same way."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


class Interrupted(XpukitError):
    """verify stopped by a signal, after removing what it made; exits 128 + the signal's number."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@contextlib.contextmanager
def _signals_stop_like_ctrl_c() -> Iterator[None]:
    """SIGTERM raises :class:`Stopped` (a KeyboardInterrupt) in the main thread while verify runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, _frame: object) -> None:
        raise Stopped(signal.Signals(signum).name)

    before = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


@contextlib.contextmanager
def _signals_ignored() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def _verify_in(
    ctx: Context,
    image_plan: ImagePlan,
    sdk: DockerClient,
    against: str,
    podman: str,
    work: Path,
    stores: list[Store],
    say: Callable[[str], None],
) -> int:
    """verify's body: every store it makes goes into ``stores`` at once, for the caller to remove."""
    say(f"verify: {build_mod.source_date(REPO_ROOT).origin}; content tag {image_plan.tag}")
    described, export = _reference(against, ctx, image_plan, sdk, work, say)
    # The reference first: a missing image or a refused registry fails in seconds, not after a build.
    fetched = export() if export is not None else None
    say(f"verify: comparing a rebuild from nothing with {described}")
    context = build_mod.copy_context(REPO_ROOT, work / "context")
    tag = f"{VERIFY_REPO}:{image_plan.tag.rsplit(':', 1)[1]}"
    command = rebuild_command(image_plan, podman, context, tag, ctx)
    images = []
    for label in ("rebuild", "second rebuild") if export is None else ("rebuild",):
        store = Store(podman, work / f"store-{len(stores) + 1}")
        stores.append(store)
        _load_base(sdk, image_plan.base, store, work, say)
        _build(store, store.wrap(command), label, say)
        images.append((label, store))
    rebuilt_id = images[0][1].image_id(tag)
    if fetched is None:
        reference = read_archive("the first rebuild", images[0][1].save(tag, work / "reference.tar"))
        reference.image_id = rebuilt_id
        other_store = images[1][1]
        rebuilt = read_archive("the second rebuild", other_store.save(tag, work / "rebuilt.tar"))
        rebuilt_id = other_store.image_id(tag)
    else:
        reference = fetched
        rebuilt = read_archive("the rebuild", images[0][1].save(tag, work / "rebuilt.tar"))
    reference_id = reference.image_id or "sha256:" + hashlib.sha256(config_bytes(reference)).hexdigest()
    if reference_id == rebuilt_id:
        print(f"reproducible: {rebuilt_id}", flush=True)
        say("verify: pushing the rebuild with gzip (into a folder) for its manifest digest")
        pushed = images[-1][1].pushed_digest(tag, work / "pushed")
        print(f"pushed with gzip: {pushed}", flush=True)
        if described.startswith("the pushed image ") and described.endswith(pushed):
            say("verify: the registry serves that manifest digest: same image, same compression")
        elif described.startswith("the pushed image "):
            say(
                f"verify: the registry's manifest ({described.rsplit('@', 1)[1]}) differs from the rebuild's "
                "pushed with gzip: same image, another compression or manifest format"
            )
        return 0
    say(f"verify: NOT reproducible: {described} is {reference_id}, the rebuild {rebuilt_id}")
    compare(reference, rebuilt, work / "files", say)
    return 1
