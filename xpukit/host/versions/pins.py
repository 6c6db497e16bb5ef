"""Load and check env/pins.toml, the one place where the kit's versions live.

Every check failure names the file, the key and the rule. Unknown values are allowed only as
empty strings, and each becomes a warning the kit prints: an empty pin is honest, an invented one
is not.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import hashlib
import json
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from xpukit.errors import MAX_ERROR_CHARS, XpukitError
from xpukit.layout import REPO_ROOT

PROFILES = ("cpu", "xpu")
DEFAULT_PINS = REPO_ROOT / "env" / "pins.toml"

COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")  # a file's SHA-256 as Debian's Packages index writes it
# An exact version: digits and letters joined by . + - ~ : (Debian and PEP 440 spellings), with
# nothing that widens it (no *, <, >, =, ^, ~= or spaces).
EXACT_VERSION_RE = re.compile(r"^[0-9][0-9A-Za-z.+~:-]*$")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


class PinsError(XpukitError):
    """env/pins.toml (or a value derived from it) breaks a rule."""


class BasePin(NamedTuple):
    """A profile's ``[base]``: the image its build starts FROM. ``digest`` is "" where it is unknown:
    the kit warns (``PinsError`` rules) and `invoke pins --lock` fills it from a registry's answer only."""

    image: str
    tag: str
    digest: str

    @property
    def name(self) -> str:
        return f"{self.image}:{self.tag}"

    @property
    def reference(self) -> str:
        """``image:tag`` plus ``@digest`` when the digest is pinned."""
        return f"{self.name}@{self.digest}" if self.digest else self.name


@dataclasses.dataclass(frozen=True)
class Profile:
    """One profile's pins, checked."""

    name: str
    table: Mapping[str, Any]
    warnings: tuple[str, ...]

    def __getitem__(self, key: str) -> Any:
        return self.table[key]

    @functools.cached_property
    def base(self) -> BasePin:
        """The ``[base]`` table as one typed value, read once (the schema checked its three keys)."""
        table = self.table["base"]
        return BasePin(table["image"], table["tag"], table["digest"])

    @property
    def base_reference(self) -> str:
        return self.base.reference

    @property
    def base_name(self) -> str:
        return self.base.name

    def pypi_requirements(self) -> list[str]:
        """Exact ``name==version`` lines for every PyPI package this profile installs."""
        reqs = []
        triton = self.table["triton"]
        if triton["source"] == "pypi":
            reqs.append(f"{triton['package']}=={triton['version']}")
        ur = self.table["ur"]
        if ur["source"] == "pypi":
            reqs += [f"{pkg}=={ur['version']}" for pkg in ur["packages"]]
        reqs += [f"{name}=={version}" for name, version in self.table["pypi"].items()]
        return reqs

    def fingerprint(self) -> str:
        """A short hash of this profile's pins (part of the image's content tag and labels)."""
        blob = json.dumps(self.table, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]


@dataclasses.dataclass(frozen=True)
class Pins:
    path: Path
    data: Mapping[str, Any]
    profiles: Mapping[str, Profile]

    def profile(self, name: str) -> Profile:
        if name not in self.profiles:
            raise PinsError(
                f"{self.path}: no profile {name!r}",
                f"use one of: {', '.join(self.profiles)}",
            )
        return self.profiles[name]

    @property
    def layers(self) -> Mapping[str, Any]:
        """``[layers.NAME]`` tables: optional layers on a profile's image (`invoke build --with NAME`)."""
        return self.data.get("layers", {})

    def layer_requirements(self, name: str) -> list[str]:
        if name not in self.layers:
            raise PinsError(f"{self.path}: no layer {name!r}", f"use one of: {', '.join(self.layers) or '(none)'}")
        return [f"{pkg}=={version}" for pkg, version in self.layers[name]["pypi"].items()]

    @property
    def host_requirements(self) -> list[str]:
        return [f"{name}=={version}" for name, version in self.data.get("host", {}).items()]


# ---------------------------------------------------------------- the schema
#
# Every table and key env/pins.toml may hold, in one place. A key not listed here is an error (with
# a did-you-mean), so a typo never silently drops a pin. Rules that tie two keys together (a PyPI
# Triton needs a version, ...) follow the schema in ``_cross_checks``.


@dataclasses.dataclass(frozen=True)
class Value:
    """One string value and the rule it follows.

    kind: ``text`` (any string), ``name`` (a package name), ``version`` (exact or empty),
    ``commit`` (40 hex), ``digest`` (``sha256:`` + 64 hex or empty), ``sha256`` (a file's 64 hex),
    ``url`` (http or https), ``image`` (a repository without tag or digest), ``tag`` (a tag, never
    a digest), ``choice`` (one of ``choices``).
    """

    kind: str
    choices: tuple[str, ...] = ()
    required: bool = True  # the key must be present
    allow_empty: bool = True  # "" is accepted (an honest "unknown")
    warn_empty: str | None = None  # when empty, warn "<key> is unpinned" with this note


@dataclasses.dataclass(frozen=True)
class ListOf:
    """An array of strings, each following ``item``."""

    item: Value
    required: bool = True


@dataclasses.dataclass(frozen=True)
class MapOf:
    """A table whose keys are free names (packages, variants), each value following ``item``."""

    item: Value | Table
    key_kind: str = "name"
    required: bool = True
    shape: str = 'NAME = "VALUE"'


@dataclasses.dataclass(frozen=True)
class Table:
    """A table with a fixed set of keys."""

    keys: Mapping[str, Value | ListOf | MapOf | Table]
    required: bool = True


TRITON_SOURCES = ("pypi", "git")
TORCH_SOURCES = ("none", "wheel", "source")
# debian-folder: Debian packages of another suite (forky), unpacked into a self-contained folder
OCLOC_SOURCES = ("apt", "intel-gpu-repo", "debian-folder")
UR_SOURCES = ("pypi", "oneapi")
LLVM_SOURCES = ("", "prebuilt", "source")

_PACKAGES = MapOf(Value("version", warn_empty=""), shape='NAME = "EXACT VERSION"')
_DEBS = MapOf(
    Table({"version": Value("version", allow_empty=False), "sha256": Value("sha256", allow_empty=False)}),
    required=False,
    shape='NAME = { version = "EXACT VERSION", sha256 = "<64-hex SHA-256 of the .deb>" }',
)
_VARIANTS = MapOf(Value("commit", allow_empty=False), required=False, shape='NAME = "<40-hex commit>"')

PROFILE_SCHEMA = Table(
    {
        "description": Value("text"),
        "python": Value("version", warn_empty="the base image's python3"),
        # Where python is the base image's (empty), the series its lock is resolved for; else python's.
        "python_series": Value("version", required=False),
        "base": Table(
            {
                "image": Value("image", allow_empty=False),
                "tag": Value("tag", allow_empty=False),
                "digest": Value("digest"),
            }
        ),
        "apt": _PACKAGES,
        "build_apt": _PACKAGES,
        "pypi": _PACKAGES,
        "ocloc": Table(
            {
                "source": Value("choice", OCLOC_SOURCES),
                "package": Value("name", allow_empty=False),
                "version": Value("version", warn_empty="matches the base image's compute runtime"),
                # intel-gpu-repo: the IGC package installed and held at the runtime's version with ocloc
                "igc_package": Value("name", required=False),
                # debian-folder only: where the .debs come from, and each one pinned by its SHA-256
                "suite": Value("name", required=False),
                "mirror": Value("url", required=False),
                "debs": _DEBS,
            }
        ),
        # --base omix: a plain OS image plus Intel OMIX (GPU user-mode driver + DLE in one package)
        "omix": Table(
            {
                "image": Value("image", allow_empty=False),
                "tag": Value("tag", allow_empty=False),
                "digest": Value("digest"),
                "package": Value("name", allow_empty=False),
                "version": Value("version"),
                "apt_repo": Value("text"),
                "apt_key": Value("text"),
            },
            required=False,
        ),
        "triton": Table(
            {
                "source": Value("choice", TRITON_SOURCES),
                "package": Value("name", allow_empty=False),
                "version": Value("version"),
                "repo": Value("text"),
                "commit": Value("commit"),
                "llvm": Value("choice", LLVM_SOURCES),
                "variants": _VARIANTS,
                "llvm_pins": _VARIANTS,
            }
        ),
        "torch": Table(
            {
                "source": Value("choice", TORCH_SOURCES),
                "commit": Value("commit"),
                "wheel_version": Value("version", required=False),
                "wheel_index": Value("text"),
                "xpu_arch_list": Value("text"),
                "variants": _VARIANTS,
            }
        ),
        "ur": Table(
            {
                "source": Value("choice", UR_SOURCES),
                "version": Value("version"),
                "packages": ListOf(Value("name", allow_empty=False), required=False),
                "matrix": ListOf(Value("version", allow_empty=False), required=False),
            }
        ),
    }
)

# Optional layers on top of a profile's image (`invoke build --with NAME`): their own lock file
# (env/lock/<profile>-<name>.txt) and Dockerfile stage, outside the profile's table so the
# profile's fingerprint, lock and image stay as they are.
LAYER_SCHEMA = Table(
    {
        "description": Value("text"),
        "profile": Value("choice", ("cpu",)),
        "pypi": _PACKAGES,
    }
)

TOP_KEYS = ("schema", *PROFILES, "host", "layers")
_TOML_TYPES = {str: "string", int: "integer", float: "float", bool: "boolean", list: "array", dict: "table"}
_DIGEST_IN_TEXT = re.compile(r"sha256:[0-9a-fA-F]{6,}")
# Docker's rules for a tag and for a repository path (lowercase components; a registry host may lead).
TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
IMAGE_RE = re.compile(
    r"^(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:[._-]+[a-z0-9]+)*(?:/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*$"
)


def _type_name(value: Any) -> str:
    return _TOML_TYPES.get(type(value), type(value).__name__)


def _display(path: Path) -> str:
    """The path as the user would type it: relative to the working directory or the checkout."""
    resolved = path.resolve()
    try:
        roots = [Path.cwd(), REPO_ROOT]
    except OSError:  # the working directory was removed
        roots = [REPO_ROOT]
    for root in roots:
        try:
            return str(resolved.relative_to(root))
        except ValueError:
            continue
    # A very long path would crowd the key, the rule and the fix out of the one line.
    return str(path) if len(str(path)) <= 80 else f".../{resolved.parent.name}/{resolved.name}"


def _listing(keys: list[str], budget: int) -> str:
    """``a, b, c`` cut to ``budget`` characters with ``...``."""
    text = ", ".join(keys)
    return text if len(text) <= budget else text[: max(budget - 4, 0)].rsplit(", ", 1)[0] + ", ..."


class _Checker:
    """Walks the data along the schema; the first broken rule raises one PinsError line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.shown = _display(path)
        self.warnings: list[str] = []

    def fail(self, key: str, rule: str, fix: str = "") -> None:
        head = f"{self.shown}: {key}: {rule}"
        fix = fix or f"edit {key} there"
        room = MAX_ERROR_CHARS - len(head) - len(" (fix: )")
        if room < len(fix):  # keep the one line within MAX_ERROR_CHARS; the key and the rule come first
            fix = fix[: max(room - 3, 0)] + "..."
        raise PinsError(head, fix)

    def unknown(self, key: str, where: str, known: list[str]) -> None:
        full = f"{where}.{key}" if where else key
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        table = f"[{where}]" if where else "the top level"
        if close:
            self.fail(full, "unknown key", f"did you mean {close[0]!r}? rename it, or remove it")
        budget = MAX_ERROR_CHARS - len(f"{self.shown}: {full}: unknown key (fix: remove it; {table} takes: )")
        self.fail(full, "unknown key", f"remove it; {table} takes: {_listing(known, budget)}")

    def walk(self, spec: Value | ListOf | MapOf | Table, value: Any, key: str) -> None:
        if isinstance(spec, Table):
            self.table(spec, value, key)
        elif isinstance(spec, MapOf):
            if not isinstance(value, dict):
                self.fail(key, f"must be a table of {spec.shape}, got {_type_name(value)}", f"write it as [{key}]")
            for name, item in value.items():
                if spec.key_kind == "name" and not NAME_RE.match(name):
                    self.fail(f"{key}.{name}", "not a valid package name")
                self.walk(spec.item, item, f"{key}.{name}")
        elif isinstance(spec, ListOf):
            if not isinstance(value, list):
                self.fail(key, f"must be an array of strings, got {_type_name(value)}", f'write {key} = ["...", ...]')
            for item in value:
                self.value(spec.item, item, key)
        else:
            self.value(spec, value, key)

    def table(self, spec: Table, value: Any, where: str) -> None:
        if not isinstance(value, dict):
            self.fail(where, f"must be a table, got {_type_name(value)}", f"write it as a [{where}] table")
        for key in value:
            if key not in spec.keys:
                self.unknown(key, where, list(spec.keys))
        for key, child in spec.keys.items():
            if key not in value:
                if child.required:
                    self.fail(f"{where}.{key}", "missing key")
                continue
            self.walk(child, value[key], f"{where}.{key}")

    def value(self, spec: Value, value: Any, key: str) -> None:
        if not isinstance(value, str):
            self.fail(key, f"must be a string, got {_type_name(value)} {value!r}"[:80], f'quote it: "{value}"'[:60])
        if value == "":
            if not spec.allow_empty:
                self.fail(key, "must not be empty")
            if spec.warn_empty is not None:
                self.warnings.append(f"{key} is unpinned{f' ({spec.warn_empty})' if spec.warn_empty else ''}")
            return
        if spec.kind not in ("digest", "sha256") and _DIGEST_IN_TEXT.search(value):
            where = key.rsplit(".", 1)[0]
            fix = (
                f"move the digest to {where}.digest and write a tag name here"
                if spec.kind in ("tag", "image")
                else "write the value this key names; a digest belongs only in <profile>.base.digest"
            )
            self.fail(key, f"{value[:24]!r}... is a digest, not a {spec.kind}", fix)
        if spec.kind == "version" and not EXACT_VERSION_RE.match(value):
            self.fail(key, f"version {value!r} is not exact (write one version, no ranges)"[:120])
        elif spec.kind == "commit" and not COMMIT_RE.match(value):
            self.fail(key, f"commit {value[:48]!r} must be 40 lowercase hex digits")
        elif spec.kind == "sha256" and not SHA256_RE.match(value):
            self.fail(key, f"{value[:12]!r}... is not 64 lowercase hex")
        elif spec.kind == "url" and not re.fullmatch(r"https?://[^\s/]+\S*", value):
            self.fail(key, f"{value[:48]!r} is not an http(s) URL")
        elif spec.kind == "digest" and not DIGEST_RE.match(value):
            self.fail(key, f"{value[:48]!r} must be 'sha256:' followed by 64 hex digits or empty")
        elif spec.kind == "choice" and value not in spec.choices:
            self.fail(key, f"{value[:40]!r} is not one of {', '.join(repr(c) for c in spec.choices)}")
        elif spec.kind == "name" and not NAME_RE.match(value):
            self.fail(key, f"{value[:40]!r} is not a valid package name")
        elif spec.kind == "tag" and not TAG_RE.match(value):
            self.fail(key, f"{value[:40]!r} is not an image tag (letters, digits, _ . -)")
        elif spec.kind == "image" and not IMAGE_RE.match(value):
            self.fail(
                key,
                f"{value[:40]!r} is not an image repository name",
                f"write the repository only (e.g. debian); the tag goes in {key.rsplit('.', 1)[0]}.tag",
            )

    def cross_checks(self, name: str, table: Mapping[str, Any]) -> None:
        """Rules that tie two keys of one profile together."""
        base, triton, torch, ur = table["base"], table["triton"], table["torch"], table["ur"]
        if base["digest"] == "":
            self.warnings.append(
                f"{name}.base: {base['image']}:{base['tag']} is not pinned by digest "
                "(run `invoke pins --lock` where the registry is reachable)"
            )
        if triton["source"] == "pypi" and not triton["version"]:
            self.fail(f"{name}.triton.version", "a PyPI Triton needs an exact version")
        if triton["source"] == "git":
            if not triton["commit"]:
                self.fail(f"{name}.triton.commit", "a git Triton needs a commit (40 lowercase hex digits)")
            if not triton["repo"]:
                self.fail(f"{name}.triton.repo", "a git Triton needs a repository URL")
        # A PyTorch or LLVM pin for a variant Triton does not name would never be used: a typo.
        variants = triton.get("variants", {})
        for key, pinned in (
            (f"{name}.torch.variants", torch.get("variants", {})),
            (f"{name}.triton.llvm_pins", triton.get("llvm_pins", {})),
        ):
            for variant in pinned:
                if variant not in variants:
                    self.fail(
                        f"{key}.{variant}",
                        f"names no {name}.triton.variants entry",
                        f"add it there or remove {variant}",
                    )
        if torch["source"] == "source" and not torch["commit"]:
            self.fail(f"{name}.torch.commit", "a source PyTorch needs a commit (40 lowercase hex digits)")
        if torch["source"] == "wheel" and not torch.get("wheel_version"):
            self.fail(f"{name}.torch.wheel_version", "the wheel source needs an exact version")
        ocloc = table["ocloc"]
        if ocloc["source"] == "debian-folder":
            debs = ocloc.get("debs") or {}
            for key in ("suite", "mirror"):
                if not ocloc.get(key):
                    self.fail(f"{name}.ocloc.{key}", "the debian-folder source needs it")
            if ocloc["package"] not in debs:
                self.fail(f"{name}.ocloc.debs", f"must pin {ocloc['package']} (ocloc.package)")
            if debs[ocloc["package"]]["version"] != ocloc["version"]:
                self.fail(
                    f"{name}.ocloc.version",
                    f"{ocloc['version']!r} differs from debs.{ocloc['package']}.version "
                    f"{debs[ocloc['package']]['version']!r}",
                    "write the same version in both",
                )
        elif ocloc.get("debs"):
            self.fail(f"{name}.ocloc.debs", f"only the debian-folder source reads it, not {ocloc['source']!r}")
        if ur["source"] == "pypi":
            if not ur["version"]:
                self.fail(f"{name}.ur.version", "PyPI Unified Runtime wheels need an exact version")
            if not ur.get("packages"):
                self.fail(f"{name}.ur.packages", "must list the UR wheels to install")

    def top(self, data: Mapping[str, Any]) -> None:
        for key in data:
            if key not in TOP_KEYS:
                self.unknown(key, "", list(TOP_KEYS))
        schema = data.get("schema")
        if schema != 1 or isinstance(schema, bool):
            self.fail("schema", f"must be the integer 1, got {schema!r}"[:60], f"set schema = 1 in {self.shown}")
        for name in PROFILES:
            if name not in data:
                self.fail(name, "missing profile table")

    def profile(self, name: str, table: Any) -> Profile:
        before = len(self.warnings)
        self.table(PROFILE_SCHEMA, table, name)
        self.cross_checks(name, table)
        return Profile(name, table, tuple(self.warnings[before:]))


def _decode(path: Path, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        shown = _display(path)
        raise PinsError(
            f"{shown}: line {line}: byte 0x{raw[exc.start]:02x} is not UTF-8", f"save {shown} as UTF-8"
        ) from None


def load(path: Path | str | None = None) -> Pins:
    """Read and check a pins file (default: XPUKIT_PINS_FILE, else env/pins.toml of this checkout)."""
    path = Path(path or os.environ.get("XPUKIT_PINS_FILE") or DEFAULT_PINS)
    shown = _display(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise PinsError(f"{shown}: no such pins file", "run from an xpukit checkout or set XPUKIT_PINS_FILE") from None
    except OSError as exc:
        raise PinsError(f"{shown}: cannot be read ({exc.strerror})", f"make {shown} a readable file") from None
    try:
        data = tomllib.loads(_decode(path, raw))
    except tomllib.TOMLDecodeError as exc:
        raise PinsError(f"{shown}: not valid TOML ({exc})"[:150], f"fix the syntax of {shown}") from None
    checker = _Checker(path)
    checker.top(data)
    profiles = {name: checker.profile(name, data[name]) for name in PROFILES}
    if "host" in data:
        checker.walk(_PACKAGES, data["host"], "host")
    for name, table in data.get("layers", {}).items():
        checker.table(LAYER_SCHEMA, table, f"layers.{name}")
    return Pins(path, data, profiles)


def lock_path(profile: str, root: Path = REPO_ROOT) -> Path:
    return root / "env" / "lock" / f"{profile}.txt"


def layer_lock_path(profile: str, layer: str, root: Path = REPO_ROOT) -> Path:
    return root / "env" / "lock" / f"{profile}-{layer}.txt"
