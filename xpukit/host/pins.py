"""Load and check env/pins.toml, the one place where the kit's versions live.

Every check failure names the file, the key and the rule. Unknown values are allowed only as
empty strings, and each becomes a warning the kit prints: an empty pin is honest, an invented one
is not.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from xpukit.errors import XpukitError

PROFILES = ("cpu", "xpu")
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PINS = REPO_ROOT / "env" / "pins.toml"

COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
# An exact version: digits and letters joined by . + - ~ : (Debian and PEP 440 spellings), with
# nothing that widens it (no *, <, >, =, ^, ~= or spaces).
EXACT_VERSION_RE = re.compile(r"^[0-9][0-9A-Za-z.+~:-]*$")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")

TRITON_SOURCES = ("pypi", "git")
TORCH_SOURCES = ("none", "wheel", "source")
OCLOC_SOURCES = ("apt", "intel-gpu-repo")
UR_SOURCES = ("pypi", "oneapi")
LLVM_SOURCES = ("", "prebuilt", "source")


class PinsError(XpukitError):
    """env/pins.toml (or a value derived from it) breaks a rule."""


@dataclasses.dataclass(frozen=True)
class Profile:
    """One profile's pins, checked."""

    name: str
    table: Mapping[str, Any]
    warnings: tuple[str, ...]

    def __getitem__(self, key: str) -> Any:
        return self.table[key]

    @property
    def base_reference(self) -> str:
        """``image:tag`` plus ``@digest`` when the digest is pinned."""
        base = self.table["base"]
        ref = f"{base['image']}:{base['tag']}"
        return f"{ref}@{base['digest']}" if base["digest"] else ref

    @property
    def base_name(self) -> str:
        return f"{self.table['base']['image']}:{self.table['base']['tag']}"

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
    def host_requirements(self) -> list[str]:
        return [f"{name}=={version}" for name, version in self.data.get("host", {}).items()]


class _Checker:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.warnings: list[str] = []

    def fail(self, key: str, rule: str) -> None:
        raise PinsError(f"{self.path}: {key}: {rule}", f"edit {key} in {self.path}")

    def table(self, parent: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
        value = parent.get(key)
        if value is None:
            self.fail(f"{where}.{key}", "missing table")
        if not isinstance(value, Mapping):
            self.fail(f"{where}.{key}", "must be a table")
        return value

    def string(self, parent: Mapping[str, Any], key: str, where: str) -> str:
        if key not in parent:
            self.fail(f"{where}.{key}", "missing key")
        value = parent[key]
        if not isinstance(value, str):
            self.fail(f"{where}.{key}", f"must be a string, got {type(value).__name__}")
        return value

    def version(self, parent: Mapping[str, Any], key: str, where: str, what: str = "") -> str:
        value = self.string(parent, key, where)
        if value == "":
            self.warnings.append(f"{where}.{key} is unpinned{f' ({what})' if what else ''}")
        elif not EXACT_VERSION_RE.match(value):
            self.fail(f"{where}.{key}", f"version {value!r} is not exact (write one version, no ranges)")
        return value

    def commit(self, parent: Mapping[str, Any], key: str, where: str, required: bool) -> str:
        value = self.string(parent, key, where)
        if value == "" and not required:
            return value
        if not COMMIT_RE.match(value):
            self.fail(f"{where}.{key}", f"commit {value!r} must be 40 lowercase hex digits")
        return value

    def choice(self, parent: Mapping[str, Any], key: str, where: str, choices: tuple[str, ...]) -> str:
        value = self.string(parent, key, where)
        if value not in choices:
            self.fail(f"{where}.{key}", f"{value!r} is not one of {', '.join(repr(c) for c in choices)}")
        return value

    def packages(self, parent: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
        table = self.table(parent, key, where)
        for name in table:
            if not NAME_RE.match(name):
                self.fail(f"{where}.{key}.{name}", "not a valid package name")
            self.version(table, name, f"{where}.{key}")
        return table

    def profile(self, name: str, table: Mapping[str, Any]) -> Profile:
        self.string(table, "description", name)
        self.version(table, "python", name, "the base image's python3")
        base = self.table(table, "base", name)
        for key in ("image", "tag"):
            if not self.string(base, key, f"{name}.base"):
                self.fail(f"{name}.base.{key}", "must not be empty")
        digest = self.string(base, "digest", f"{name}.base")
        if digest == "":
            self.warnings.append(
                f"{name}.base: {base['image']}:{base['tag']} is not pinned by digest "
                "(run `invoke pins --lock` where the registry is reachable)"
            )
        elif not DIGEST_RE.match(digest):
            self.fail(f"{name}.base.digest", f"{digest!r} must be 'sha256:' followed by 64 hex digits or empty")
        self.packages(table, "apt", name)
        self.packages(table, "build_apt", name)
        self.packages(table, "pypi", name)

        ocloc = self.table(table, "ocloc", name)
        self.choice(ocloc, "source", f"{name}.ocloc", OCLOC_SOURCES)
        self.string(ocloc, "package", f"{name}.ocloc")
        self.version(ocloc, "version", f"{name}.ocloc", "matches the base image's compute runtime")

        triton = self.table(table, "triton", name)
        source = self.choice(triton, "source", f"{name}.triton", TRITON_SOURCES)
        self.string(triton, "package", f"{name}.triton")
        self.string(triton, "repo", f"{name}.triton")
        self.choice(triton, "llvm", f"{name}.triton", LLVM_SOURCES)
        if source == "pypi":
            if not self.version(triton, "version", f"{name}.triton"):
                self.fail(f"{name}.triton.version", "a PyPI Triton needs an exact version")
            self.commit(triton, "commit", f"{name}.triton", required=False)
        else:
            self.string(triton, "version", f"{name}.triton")
            self.commit(triton, "commit", f"{name}.triton", required=True)
            if not triton["repo"]:
                self.fail(f"{name}.triton.repo", "a git Triton needs a repository URL")
        variants = triton.get("variants", {})
        for variant in variants:
            self.commit(variants, variant, f"{name}.triton.variants", required=True)

        torch = self.table(table, "torch", name)
        torch_source = self.choice(torch, "source", f"{name}.torch", TORCH_SOURCES)
        self.commit(torch, "commit", f"{name}.torch", required=torch_source == "source")
        if torch_source == "wheel" and not torch.get("wheel_version"):
            self.fail(f"{name}.torch.wheel_version", "the wheel source needs an exact version")
        if torch.get("wheel_version"):
            self.version(torch, "wheel_version", f"{name}.torch")
        self.string(torch, "wheel_index", f"{name}.torch")
        torch_variants = torch.get("variants", {})
        for variant in torch_variants:
            self.commit(torch_variants, variant, f"{name}.torch.variants", required=True)
        self.string(torch, "xpu_arch_list", f"{name}.torch")

        ur = self.table(table, "ur", name)
        ur_source = self.choice(ur, "source", f"{name}.ur", UR_SOURCES)
        if ur_source == "pypi":
            if not self.version(ur, "version", f"{name}.ur"):
                self.fail(f"{name}.ur.version", "PyPI Unified Runtime wheels need an exact version")
            packages = ur.get("packages")
            if not isinstance(packages, list) or not packages or not all(isinstance(p, str) for p in packages):
                self.fail(f"{name}.ur.packages", "must list the UR wheels to install")
        matrix = ur.get("matrix", [])
        if not isinstance(matrix, list):
            self.fail(f"{name}.ur.matrix", "must be a list of exact UR wheel versions")
        for version in matrix:
            if not isinstance(version, str) or not EXACT_VERSION_RE.match(version):
                self.fail(f"{name}.ur.matrix", f"version {version!r} is not exact (write one version, no ranges)")
        return Profile(name, table, ())


def load(path: Path | str | None = None) -> Pins:
    """Read and check a pins file (default: XPUKIT_PINS_FILE, else env/pins.toml of this checkout)."""
    path = Path(path or os.environ.get("XPUKIT_PINS_FILE") or DEFAULT_PINS)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise PinsError(f"{path}: no such pins file", "run from an xpukit checkout or pass --pins") from None
    except tomllib.TOMLDecodeError as exc:
        raise PinsError(f"{path}: not valid TOML ({exc})", f"fix the syntax of {path}") from None
    if data.get("schema") != 1:
        raise PinsError(f"{path}: schema: must be 1", f"set schema = 1 in {path}")
    checker = _Checker(path)
    profiles = {}
    for name in PROFILES:
        if name not in data:
            checker.fail(name, "missing profile table")
        before = len(checker.warnings)
        checked = checker.profile(name, data[name])
        profiles[name] = dataclasses.replace(checked, warnings=tuple(checker.warnings[before:]))
    unknown = set(data) - set(PROFILES) - {"schema", "host"}
    if unknown:
        checker.fail(", ".join(sorted(unknown)), f"unknown table; profiles are {', '.join(PROFILES)}")
    if "host" in data:
        checker.packages(data, "host", "host")
    return Pins(path, data, profiles)


def lock_path(profile: str, root: Path = REPO_ROOT) -> Path:
    return root / "env" / "lock" / f"{profile}.txt"
