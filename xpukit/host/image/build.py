"""The image build: build args from the pins, the content tag, the base image, the BuildKit command."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import os
import shutil
import subprocess
import types
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xpukit import layout
from xpukit.errors import XpukitError
from xpukit.host import build_cli, engine, processes
from xpukit.host.versions import pins as pins_mod
from xpukit.host.versions.lock import check_lock_matches

if TYPE_CHECKING:
    from docker import DockerClient

# Everything the Dockerfile copies into the image: the content tag hashes all of it (with the build
# args), so one tag always names one image, down to the kit's own sources.
CONTENT_PATHS = ("Dockerfile", ".dockerignore", "pyproject.toml", "scripts", "env", "xpukit", "examples", "tests")
# Docker's predefined proxy args: passed by name (the value comes from the environment, never printed)
# and kept out of the image's history by Docker itself.
PROXY_ARGS = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")
# Under CONTENT_PATHS but never copied into the image: the sharing lock (recording a pushed digest
# must not change the content tag it records) and npm's installed tools (present on some machines only).
NOT_CONTENT = ("env/lock/images.toml", "env/npm/node_modules")
# Build args that describe the build rather than pin anything: labels, the source builds' job count, and
# the mirror the compiler's .debs come from (each .deb is pinned by its SHA-256 whichever mirror serves it).
META_ARGS = ("XPUKIT_REVISION", "XPUKIT_CREATED", "MAX_JOBS", "OCLOC_MIRROR")
LOCAL_BASE_REPO = "xpukit-base"
# What the Dockerfile reads from the checkout (.dockerignore keeps the rest out of the builder).
BUILD_CONTEXT = CONTENT_PATHS


def copy_context(root: Path, dest: Path) -> Path:
    """A copy of the build context of ``root`` in ``dest``, to build a modified tree."""
    dest.mkdir(parents=True, exist_ok=True)
    for item in BUILD_CONTEXT:
        src = root / item
        if src.is_dir():
            shutil.copytree(src, dest / item, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dest / item)
    return dest


@dataclasses.dataclass(frozen=True)
class Variant:
    """Choices a build can make inside one profile (the xpu profile's source builds)."""

    triton: str = ""  # a name from [profile.triton.variants] or a 40-hex commit
    torch: str = ""  # none | wheel | source
    llvm: str = ""  # prebuilt | source
    torch_arch_list: str = ""
    layer: str = ""  # an optional layer stage after the image ([layers.NAME]; `--with NAME`)
    base: str = ""  # "" (the profile's [base]) | omix (the profile's [omix]: a plain OS image + intel-omix-dev)


BASE_CHOICES = ("", "omix")


def with_base(profile: pins_mod.Profile, choice: str) -> pins_mod.Profile:
    """The profile as ``--base choice`` builds it: ``omix`` takes its [omix] image as the base."""
    if choice not in BASE_CHOICES:
        raise XpukitError(f"unknown --base {choice!r}", "use --base omix, or leave it out for the profile's own base")
    if not choice:
        return profile
    omix = profile.table.get("omix")
    if not omix:
        raise XpukitError(
            f"--base omix needs a [{profile.name}.omix] table in env/pins.toml, which the {profile.name} profile lacks",
            "use --profile xpu",
        )
    base = {"image": omix["image"], "tag": omix["tag"], "digest": omix["digest"]}
    return dataclasses.replace(profile, table={**profile.table, "base": base})


# Where a Triton commit names the PyTorch and LLVM it was tested with (read in its checkout at build time).
TORCH_PIN_FILE = ".github/pins/pytorch.txt"
LLVM_PIN_FILES = ("cmake/llvm-info.json", "cmake/llvm-hash.txt")  # llvm-info.json's llvm_hash since mid-2026


@dataclasses.dataclass(frozen=True)
class SourcePins:
    """The commits a source build uses: Triton's, and the PyTorch and LLVM it pins. An empty
    ``torch`` or ``llvm`` is read from the Triton checkout at build time (never borrowed from
    another variant); a known one is what env/pins.toml records for that Triton commit."""

    variant: str  # the variant name, "" for a commit env/pins.toml does not name
    triton: str
    torch: str
    llvm: str

    def lines(self, torch_source: str, llvm_source: str) -> list[str]:
        """What the plan shows: each pin's value, or where the build reads it."""
        named = f" (--triton {self.variant})" if self.variant else " (a commit env/pins.toml does not name)"
        out = [f"pins: triton {self.triton}{named}"]
        if torch_source != "source":
            out.append(f"pins: torch: --torch {torch_source}, no PyTorch source build")
        elif self.torch:
            out.append(
                f"pins: torch {self.torch} (Triton {self.triton[:12]}'s {TORCH_PIN_FILE}, recorded in env/pins.toml)"
            )
        else:
            out.append(f"pins: torch read from {TORCH_PIN_FILE} of Triton {self.triton[:12]} at build time")
        how = "built from source" if llvm_source == "source" else "downloaded prebuilt by Triton's setup.py"
        if self.llvm:
            out.append(f"pins: llvm {self.llvm} ({how}; checked against the checkout's pin at build time)")
        else:
            out.append(
                f"pins: llvm read from {' or '.join(LLVM_PIN_FILES)} of Triton {self.triton[:12]} at build time ({how})"
            )
        return out


def source_pins(profile: pins_mod.Profile, requested: str = "") -> SourcePins:
    """The Triton commit ``requested`` (a variant name or a 40-hex commit; "" for the profile's
    default) and the PyTorch and LLVM pins env/pins.toml records for that very commit."""
    triton = profile.table["triton"]
    torch = profile.table["torch"]
    variants = triton.get("variants", {})
    if not requested:
        commit = triton["commit"]
    elif requested in variants:
        commit = variants[requested]
    elif pins_mod.COMMIT_RE.match(requested):
        commit = requested
    else:
        raise XpukitError(
            f"unknown Triton variant {requested!r}",
            f"use one of {', '.join(variants) or '(none pinned)'} or a 40-hex commit",
        )
    # Pins belong to a commit, not to a name: a commit a variant names gets that variant's pins.
    name = requested if requested in variants else next((v for v, c in variants.items() if c == commit), "")
    # The profile's own torch.commit goes with its own triton.commit, and with nothing else.
    own = torch["commit"] if commit == triton["commit"] else ""
    torch_commit = torch.get("variants", {}).get(name, "") or own
    llvm_commit = triton.get("llvm_pins", {}).get(name, "") if name else ""
    return SourcePins(name, commit, torch_commit, llvm_commit)


def build_args(profile: pins_mod.Profile, base_image: str, variant: Variant = Variant()) -> dict[str, str]:
    """Every pin of a profile as the Dockerfile's build args."""
    table = profile.table
    triton = dict(table["triton"])
    torch = dict(table["torch"])
    llvm_commit = ""
    if variant.triton and triton["source"] != "git":
        raise XpukitError(
            f"--triton selects a git commit, but the {profile.name} profile installs Triton from PyPI",
            "use --profile xpu, or drop --triton",
        )
    if triton["source"] == "git":
        pinned = source_pins(profile, variant.triton)
        triton["commit"] = pinned.triton
        # Each Triton commit pins its own PyTorch: the one recorded for it, else read at build time.
        torch["commit"] = pinned.torch
        llvm_commit = pinned.llvm
    if variant.torch:
        if variant.torch not in pins_mod.TORCH_SOURCES:
            raise XpukitError(f"unknown --torch {variant.torch!r}", f"use one of {', '.join(pins_mod.TORCH_SOURCES)}")
        if variant.torch != "none" and profile.name != "xpu":
            raise XpukitError("PyTorch is only built in the xpu profile", "use --profile xpu or --torch none")
        if variant.torch == "wheel" and not torch["wheel_version"]:
            raise XpukitError(
                f"--torch wheel needs {profile.name}.torch.wheel_version in env/pins.toml, which is empty",
                "fill it with an exact XPU wheel version, or use --torch source / none",
            )
        torch["source"] = variant.torch
    llvm = variant.llvm or triton["llvm"]
    if variant.llvm and triton["source"] != "git":
        raise XpukitError("--llvm only applies to a Triton built from git", "use --profile xpu")
    ocloc = table["ocloc"]
    folder = ocloc["source"] == "debian-folder"
    apt = " ".join(f"{name}={ver}" if ver else name for name, ver in table["apt"].items())
    build_apt = " ".join(f"{name}={ver}" if ver else name for name, ver in table["build_apt"].items())
    return {
        "BASE_IMAGE": base_image,
        "XPUKIT_PROFILE": profile.name,
        "PYTHON_VERSION": table["python"],
        "APT_PACKAGES": apt,
        "BUILD_APT_PACKAGES": build_apt,
        "OCLOC_SOURCE": ocloc["source"],
        "OCLOC_PACKAGE": ocloc["package"],
        "OCLOC_VERSION": ocloc["version"],
        "OCLOC_IGC_PACKAGE": ocloc.get("igc_package", ""),
        **omix_args(table, variant.base),
        # The Dockerfile's ocloc-folder stage assembles the debian-folder source; ocloc-none is empty.
        "OCLOC_STAGE": "folder" if folder else "none",
        "OCLOC_SUITE": ocloc.get("suite", "") if folder else "",
        "OCLOC_MIRROR": ocloc.get("mirror", "") if folder else "",
        "OCLOC_DEBS": ocloc_debs(ocloc) if folder else "",
        "TRITON_SOURCE": triton["source"],
        "TRITON_VERSION": triton["version"],
        "TRITON_REPO": triton["repo"],
        "TRITON_COMMIT": triton["commit"],
        "LLVM_SOURCE": llvm,
        "LLVM_COMMIT": llvm_commit,
        "TORCH_SOURCE": torch["source"],
        "TORCH_COMMIT": torch["commit"],
        "TORCH_VERSION": torch["wheel_version"],
        "TORCH_INDEX_URL": torch["wheel_index"],
        "TORCH_XPU_ARCH_LIST": variant.torch_arch_list or torch["xpu_arch_list"],
        "UR_SOURCE": table["ur"]["source"],
        "UR_VERSION": table["ur"]["version"],
        "UR_PACKAGES": " ".join(table["ur"].get("packages", [])),
        "UR_MATRIX": " ".join(table["ur"].get("matrix", [])),
        "PYPI_PINS": " ".join(profile.pypi_requirements()),
        "XPUKIT_PINS": profile.fingerprint(),
        **layout.build_args(),  # the image's paths and user, owned by xpukit/layout.py
    }


def omix_args(table: Mapping[str, Any], choice: str) -> dict[str, str]:
    """install-omix.sh's inputs: empty (nothing installed) unless the build is ``--base omix``."""
    omix = (table.get("omix") or {}) if choice == "omix" else {}
    return {
        "OMIX_PACKAGE": omix.get("package", ""),
        "OMIX_VERSION": omix.get("version", ""),
        "OMIX_APT_REPO": omix.get("apt_repo", ""),
        "OMIX_APT_KEY": omix.get("apt_key", ""),
    }


def ocloc_debs(ocloc: Mapping[str, Any]) -> str:
    """``NAME=VERSION/SHA256 ...``: the debian-folder source's .debs as assemble-ocloc.sh reads them
    (a Debian version never holds a slash)."""
    return " ".join(f"{name}={deb['version']}/{deb['sha256']}" for name, deb in ocloc.get("debs", {}).items())


def content_hash(root: Path, args: dict[str, str]) -> str:
    """Hash of every file the image copies (CONTENT_PATHS) plus the pinned build args."""
    digest = hashlib.sha256()
    for top in CONTENT_PATHS:
        path = root / top
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            rel = file.relative_to(root).as_posix()
            if "__pycache__" in file.parts or file.suffix == ".pyc" or rel.startswith(NOT_CONTENT):
                continue
            digest.update(rel.encode() + b"\0")
            digest.update(file.read_bytes() + b"\0")
    for key in sorted(args):
        if key not in META_ARGS:
            digest.update(f"{key}={args[key]}\0".encode())
    return digest.hexdigest()[:12]


def git(root: Path, *args: str) -> str:
    """``git -C root ARGS``'s output, "" where there is no git or no repository."""
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False)
    except OSError:
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def source_url(root: Path) -> str:
    """Where the checkout came from (its ``origin`` remote), for the image's
    org.opencontainers.image.source label; "" where there is none, and then the image has no such label."""
    return git(root, "config", "--get", "remote.origin.url")


@dataclasses.dataclass(frozen=True)
class Head:
    """The checkout's commit, as the labels (:func:`meta_args`) and :func:`source_date` need it."""

    revision: str = ""  # the full hash; "" where there is no git or no commit
    created: str = ""  # the commit's time, ISO 8601
    epoch: str = ""  # ... in seconds
    short: str = ""  # the hash, 12 digits
    dirty: bool = False  # tracked files changed since the commit


def head(root: Path) -> Head:
    """The commit from one ``git log`` and whether the tree is dirty from one ``git status``: the two
    git processes every task that plans an image runs for both of its readers."""
    lines = git(root, "log", "-1", "--abbrev=12", "--format=%H%n%cI%n%ct%n%h").splitlines()
    revision, created, epoch, short = [*lines, "", "", "", ""][:4]
    if not revision:
        return Head()
    return Head(revision, created, epoch, short, bool(git(root, "status", "--porcelain", "--untracked-files=no")))


def meta_args(root: Path, max_jobs: int = 0, commit: Head | None = None) -> dict[str, str]:
    """Revision and creation time for the OCI labels, from git where there is one (``commit``:
    :func:`head`, when the caller has it already)."""
    commit = head(root) if commit is None else commit
    revision, created = commit.revision, commit.created
    if revision and commit.dirty:
        revision += "-dirty"
    # The commit's time, not the wall clock, keeps a rebuild of the same commit identical, and a
    # dry run's command the one the build runs; without git, SOURCE_DATE_EPOCH or "unknown".
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if not created and epoch.isdigit():
        created = dt.datetime.fromtimestamp(int(epoch), dt.UTC).isoformat(timespec="seconds")
    return {
        "XPUKIT_REVISION": revision or "unknown",
        "XPUKIT_CREATED": created or "unknown",
        "MAX_JOBS": str(max_jobs or os.cpu_count() or 1),
    }


@dataclasses.dataclass(frozen=True)
class SourceDate:
    """SOURCE_DATE_EPOCH for a build: the time every file in a layer and the image itself take."""

    epoch: str  # seconds since 1970, "" when there is none (no git, no SOURCE_DATE_EPOCH)
    origin: str  # where it came from, for the one line the build prints


def source_date(root: Path, environ: dict[str, str] | None = None, commit: Head | None = None) -> SourceDate:
    """``SOURCE_DATE_EPOCH`` from the environment when set, else the time of the checkout's commit
    (never the clock: two builds of one commit must agree). A tree with uncommitted changes keeps
    its commit's time: the image is then reproducible from this tree, not from the commit.
    ``commit``: :func:`head`, when the caller has it already."""
    environ = dict(os.environ) if environ is None else environ
    given = environ.get("SOURCE_DATE_EPOCH", "").strip()
    if given:
        if not given.isdigit():
            raise XpukitError(
                f"SOURCE_DATE_EPOCH={given!r} is not a number of seconds",
                "unset it (the kit takes the commit's time) or set it to an integer, e.g. $(git log -1 --format=%ct)",
            )
        return SourceDate(given, "SOURCE_DATE_EPOCH from the environment")

    commit = head(root) if commit is None else commit
    if not commit.epoch.isdigit():
        return SourceDate("", "no git commit to take the time from")
    note = "; uncommitted changes: reproducible from this tree, not from the commit" if commit.dirty else ""
    return SourceDate(commit.epoch, f"commit {commit.short}'s time{note}")


def reproducibility_note(cli: build_cli.BuildCli | None, date: SourceDate) -> str:
    """One line: whether this engine's build is bit-for-bit reproducible, and why not."""
    if cli is not None and cli.kind == "podman":
        if not date.epoch:
            return f"build: not reproducible: {date.origin} (set SOURCE_DATE_EPOCH)"
        return f"build: reproducible: files and image dated SOURCE_DATE_EPOCH={date.epoch} ({date.origin})"
    return (
        "build: Docker's builder cannot set file and image times (no SOURCE_DATE_EPOCH rewriting before "
        "BuildKit 0.13): this image is not bit-for-bit reproducible; its content tag still names its inputs "
        "(podman builds are reproducible: docs/reproducible.md)"
    )


def local_base_name(profile: pins_mod.Profile) -> str:
    """The tag `invoke base` gives a debootstrap base for a profile."""
    return f"{LOCAL_BASE_REPO}:{profile.table['base']['tag']}"


def choose_base(
    profile: pins_mod.Profile,
    requested: str,
    exists: Callable[[str], bool],
    pull: Callable[[str], bool] | None,
    say: Callable[[str], None],
) -> str:
    """The base image to build FROM: the one asked for, the pinned one, or the local debootstrap base."""
    if requested:
        if not exists(requested) and not (pull and pull(requested)):
            raise XpukitError(
                f"base image {requested} is not present and cannot be pulled",
                "check the name, or build a local base with `invoke base`",
            )
        say(f"base: {requested} (--base-image)")
        return requested
    pinned = profile.base_reference
    # Each name asked once (a round trip each); without a digest the two names are one.
    by_name = profile.base_name if profile.base_name != pinned else ""
    found = pinned if exists(pinned) else by_name if by_name and exists(by_name) else ""
    if found:
        say(f"base: {pinned}")
        return found
    local = local_base_name(profile)
    if profile.name == "cpu" and exists(local):
        say(f"base: {local} (local base from `invoke base`; {pinned} is not present)")
        return local
    if pull is not None:
        say(f"base: pulling {pinned}")
        if pull(pinned):
            return pinned
    fix = "build a local base with `invoke base`, or pass --base-image NAME"
    if profile.name == "xpu":
        fix = "pull it where a registry is reachable (docker pull), or pass --base-image NAME"
    raise XpukitError(f"base image {pinned} is not present and cannot be pulled", fix)


@dataclasses.dataclass(frozen=True)
class CacheSource:
    """What a BuildKit build shares through a registry: ``inline`` writes BuildKit's inline cache
    into the image (a push then carries it); ``source`` is a shared image whose layers the build
    reuses (``--cache-from``), "" for none."""

    inline: bool = False
    source: str = ""


NO_CACHE = CacheSource()


@dataclasses.dataclass(frozen=True)
class BuildPlan:
    """One build, as a value: every part of the command is decided before it is made, and nothing
    changes it afterwards (tuples and read-only mappings), so a dry run prints what a real run runs."""

    profile: str
    tags: tuple[str, ...]
    args: Mapping[str, str]
    command: tuple[str, ...]
    env: Mapping[str, str]
    warnings: tuple[str, ...]
    reproducible: str = ""  # one line: whether this build is bit-for-bit reproducible (reproducibility_note)
    cache: CacheSource = NO_CACHE
    pins: tuple[str, ...] = ()  # source builds: each pin's value, or where the build reads it (SourcePins.lines)

    def __post_init__(self) -> None:
        # Frozen all the way down: a caller's list or dict is copied into immutable ones.
        object.__setattr__(self, "tags", tuple(self.tags))
        object.__setattr__(self, "args", types.MappingProxyType(dict(self.args)))
        object.__setattr__(self, "command", tuple(self.command))
        object.__setattr__(self, "env", types.MappingProxyType(dict(self.env)))
        object.__setattr__(self, "warnings", tuple(self.warnings))
        object.__setattr__(self, "pins", tuple(self.pins))

    def printable(self) -> str:
        return processes.printable(self.command, self.env)


def check_layer(root: Path, profile: pins_mod.Profile, layer: str) -> None:
    """A layer (``--with``) exists for this profile and its lock file is there."""
    table = pins_mod.load(root / "env" / "pins.toml").layers.get(layer)
    if table is None or table["profile"] != profile.name:
        raise XpukitError(
            f"--with {layer} is not a layer of the {profile.name} profile",
            f"use --profile {table['profile']}" if table else "see [layers.*] in env/pins.toml",
        )
    lock = pins_mod.layer_lock_path(profile.name, layer, root)
    if not lock.is_file():
        raise XpukitError(f"{lock.relative_to(root)} is missing", "run `invoke pins --lock` and commit it")


def content_tags(
    root: Path,
    profile: pins_mod.Profile,
    base_image: str,
    image: str,
    variant: Variant = Variant(),
    ocloc_mirror: str = "",
    only_tag: str = "",
) -> tuple[str, ...]:
    """The image's tags (the content tag first, then the profile's), from what the build copies and
    its pinned args alone: no git (the labels are not content) and no CLI, so a run whose image is
    already on the engine names it without either (:func:`plan` makes the command)."""
    if variant.layer:
        check_layer(root, profile, variant.layer)
    if only_tag:
        return (only_tag,)
    args = build_args(profile, base_image, variant)
    if ocloc_mirror and args["OCLOC_STAGE"] == "folder":
        args["OCLOC_MIRROR"] = ocloc_mirror  # not content (META_ARGS); set as the build sets it
    name = f"{profile.name}-{variant.layer}" if variant.layer else profile.name
    return (f"{image}:{name}-{content_hash(root, args)}", f"{image}:{name}")


def plan(
    root: Path,
    profile: pins_mod.Profile,
    base_image: str,
    image: str,
    cli: build_cli.BuildCli | None,
    ca_bundle: str = "",
    github_token_file: str = "",
    variant: Variant = Variant(),
    progress: str = "auto",
    network: str = "",
    engine_env: Mapping[str, str] | None = None,
    cache: Callable[[str], CacheSource] | None = None,
    ocloc_mirror: str = "",
    context: Path | None = None,
    only_tag: str = "",
    tags: tuple[str, ...] = (),
) -> BuildPlan:
    """The exact BuildKit command for a profile, with its tags.

    ``engine_env``: what the CLI needs to build on the engine the SDK talks to (DOCKER_HOST).
    ``cache``: given the content tag, what the build shares through a registry (BuildKit only).
    ``ocloc_mirror``: the Debian mirror for the compiler's .debs instead of the pinned one (a
    snapshot.debian.org URL once the pinned versions left the mirror; not part of the content tag).
    ``context``: build from this copy of ``root`` (its Dockerfile too), e.g. verify's snapshot;
    ``only_tag``: the one tag to give the image instead of the content and profile tags.
    ``tags``: what :func:`content_tags` gave for the same inputs (the plan's tag, kept as it was
    when the plan was made), else computed here."""
    args = build_args(profile, base_image, variant)
    warnings = list(profile.warnings)
    if variant.base == "omix" and not args["OMIX_APT_REPO"]:
        warnings.append(
            f"{profile.name}.omix.apt_repo is empty: the build stops at install-omix.sh "
            "(fill it with the apt line of the repository carrying intel-omix-dev)"
        )
    pin_lines: list[str] = []
    if profile.table["triton"]["source"] == "git":
        pin_lines = source_pins(profile, variant.triton).lines(args["TORCH_SOURCE"], args["LLVM_SOURCE"])
    if ocloc_mirror and args["OCLOC_STAGE"] == "folder":
        args["OCLOC_MIRROR"] = ocloc_mirror
    tags = tags or content_tags(root, profile, base_image, image, variant, ocloc_mirror, only_tag)
    commit = head(root)  # one git log and one git status for the labels and SOURCE_DATE_EPOCH both
    args.update(meta_args(root, commit=commit))
    context = context or root
    shared = cache(content_hash(root, args)) if cache is not None else NO_CACHE
    start: Sequence[str] = cli.build_command(progress) if cli else ["docker", "build", "--progress", progress]
    cmd = [*start, "--target", variant.layer or "runtime"]
    cmd += ["-f", str(context / "Dockerfile")]
    if network:
        cmd += ["--network", network]
    for key, value in args.items():
        cmd += ["--build-arg", f"{key}={value}"]
    source = source_url(root)
    if source:  # no origin remote: no source label (never a guessed address)
        cmd += ["--label", f"org.opencontainers.image.source={source}"]
    for name in PROXY_ARGS:
        if os.environ.get(name):
            cmd += ["--build-arg", name]
    if shared.inline:
        cmd += ["--build-arg", "BUILDKIT_INLINE_CACHE=1"]
    if shared.source:
        cmd += ["--cache-from", shared.source]
    if ca_bundle:
        path = Path(ca_bundle)
        if not path.is_file():
            raise XpukitError(f"CA bundle {ca_bundle} does not exist", "pass the path of a PEM file to --ca-bundle")
        cmd += ["--secret", f"id=ca_bundle,src={path.resolve()}"]
    if github_token_file:
        cmd += ["--secret", f"id=github_token,src={Path(github_token_file).resolve()}"]
    date = source_date(root, commit=commit)
    if cli is not None and cli.kind == "podman" and date.epoch:
        # buildah dates every file it commits to a layer, and the image, at this time (docs/reproducible.md).
        cmd += ["--timestamp", date.epoch]
    for t in tags:
        cmd += ["-t", t]
    cmd.append(str(context))
    env = cli.build_env() if cli else {"DOCKER_BUILDKIT": "1"}
    return BuildPlan(
        profile.name,
        tags,
        args,
        tuple(cmd),
        {**env, **(engine_env or {})},
        tuple(warnings),
        reproducibility_note(cli, date),
        shared,
        tuple(pin_lines),
    )


def pull_with_progress(sdk: DockerClient, reference: str, say: Callable[[str], None]) -> bool:
    """Pull an image, printing one line per layer state change; False when it cannot be had."""
    name, _, digest = reference.partition("@")
    repository, _, tag = name.rpartition(":")
    if not repository:  # no tag: "image" or "image@sha256:..."
        repository, tag = name, ""
    try:
        # A pinned digest is pulled as such: the content that was locked, whatever the tag holds now.
        for event in sdk.api.pull(repository, tag=digest or tag or None, stream=True, decode=True):
            if "error" in event:
                say(f"pull: {event['error']}")
                return False
            if event.get("status") and "progress" not in event:
                say(f"pull: {event.get('id', '')} {event['status']}".strip())
    except Exception as exc:
        say(f"pull: {engine.short_reason(exc)}")
        return False
    return True


def ensure_lock_current(profile: pins_mod.Profile, root: Path) -> None:
    """The profile's hash-locked requirements match env/pins.toml (no network: checked first)."""
    problems = check_lock_matches(profile, pins_mod.lock_path(profile.name, root))
    if problems:
        raise XpukitError(
            f"env/lock/{profile.name}.txt does not match env/pins.toml ({problems[0]})",
            "regenerate the lock files with `invoke pins --lock`",
        )
