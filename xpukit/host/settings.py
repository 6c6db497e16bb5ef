"""Settings: command-line flag, then environment variable, then invoke.yaml, then default, resolved once.

invoke's own config system reads invoke.yaml (the tasks hand its ``xpukit:`` section here), but its
environment layer only knows ``INVOKE_``-prefixed nested names and knows nothing of flags, while the
kit's settings are plain names users already export (DOCKER_HOST, SSL_CERT_FILE, XPUKIT_*). So one
small resolver merges the four sources here, and :class:`Context` resolves every ``auto`` once,
keeping the reason it printed.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from xpukit.errors import UsageError, XpukitError
from xpukit.host import engine as engine_mod
from xpukit.host import gpu, ui

PROFILE_CHOICES = ("auto", "cpu", "xpu")
WHERE_CHOICES = ("auto", "container", "host")
FLAG_NAMES = {"base_suite": "suite", "base_mirror": "mirror", "layer": "with"}  # a setting whose flag has another name
VOLUME_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")  # what docker and podman accept

# setting -> its environment variable; its default is the Settings field's below (written once)
SETTINGS = {
    "profile": "XPUKIT_PROFILE",
    "image": "XPUKIT_IMAGE",
    "engine": "XPUKIT_ENGINE",
    "docker_cli": "XPUKIT_DOCKER_CLI",
    "docker_host": "DOCKER_HOST",
    "base_image": "XPUKIT_BASE_IMAGE",
    "ca_bundle": "XPUKIT_CA_BUNDLE",
    "cache_volume": "XPUKIT_CACHE_VOLUME",
    "base_suite": "XPUKIT_BASE_SUITE",
    "base_mirror": "XPUKIT_BASE_MIRROR",
    "registry": "XPUKIT_REGISTRY",
    "build_network": "XPUKIT_BUILD_NETWORK",
    "layer": "XPUKIT_WITH",
    "ocloc_mirror": "XPUKIT_OCLOC_MIRROR",
}
LAYER_CHOICES = ("", "dpnp")  # optional layers on the image ([layers.*] in env/pins.toml)


@dataclasses.dataclass
class Settings:
    profile: str = "auto"
    image: str = "xpukit"
    engine: str = "auto"  # auto | docker | podman (xpukit.host.engine.resolve_engine)
    docker_cli: str = "auto"
    docker_host: str = ""
    base_image: str = ""
    ca_bundle: str = "auto"
    cache_volume: str = "xpukit-cache"
    base_suite: str = "bookworm"
    base_mirror: str = "http://deb.debian.org/debian"
    registry: str = ""  # HOST[:PORT]/NAMESPACE images are shared through (xpukit.host.image.sharing)
    build_network: str = ""  # the build's RUN steps' network (`host` where the engine's bridge has no route out)
    layer: str = ""  # an optional layer on the image: "" or dpnp (--with; its own stage and tag)
    ocloc_mirror: str = ""  # the Debian mirror of the compiler's .debs ("": the pinned one; a snapshot.debian.org URL)
    dry_run: bool = False
    debug: bool = False


def resolve(
    flags: Mapping[str, Any],
    yaml_config: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Merge the sources; a flag left as None falls through to the next source."""
    environ = os.environ if environ is None else environ
    yaml_config = check_yaml_section(yaml_config)
    values: dict[str, Any] = {}  # a setting no source names keeps the Settings default
    defaults = Settings()
    for key, env_name in SETTINGS.items():
        if flags.get(key) == "" and getattr(defaults, key):  # '' would silently mean the default
            option = FLAG_NAMES.get(key, key.replace("_", "-"))
            raise UsageError(f"--{option} is empty", f"pass --{option} {getattr(defaults, key)}, or leave it out")
        if flags.get(key) not in (None, ""):
            values[key] = flags[key]
        elif environ.get(env_name):
            values[key] = environ[env_name]
        elif yaml_config.get(key) not in (None, ""):
            values[key] = yaml_config[key]
    settings = Settings(**values, dry_run=bool(flags.get("dry_run")), debug=bool(flags.get("debug")))
    check_choice("profile", settings.profile, PROFILE_CHOICES)
    if settings.layer not in LAYER_CHOICES:
        raise UsageError(f"unknown layer {settings.layer!r} for --with", "use --with dpnp, or leave --with out")
    if not VOLUME_NAME.fullmatch(settings.cache_volume):
        raise UsageError(
            f"cache volume {settings.cache_volume!r} is not a volume name",
            "set XPUKIT_CACHE_VOLUME (or invoke.yaml cache_volume:) to letters, digits, _ . -",
        )
    if not re.fullmatch(r"https?://[^\s/]+\S*", settings.base_mirror):
        option = FLAG_NAMES["base_mirror"]
        raise UsageError(
            f"--{option} {settings.base_mirror!r} is not an http(s) URL", f"pass e.g. --{option} {defaults.base_mirror}"
        )
    if settings.ocloc_mirror and not re.fullmatch(r"https?://[^\s/]+\S*", settings.ocloc_mirror):
        raise UsageError(
            f"XPUKIT_OCLOC_MIRROR {settings.ocloc_mirror!r} is not an http(s) URL",
            "set it to a Debian mirror, e.g. http://snapshot.debian.org/archive/debian/20261201T000000Z",
        )
    if settings.engine not in engine_mod.ENGINE_CHOICES:
        raise XpukitError(
            f"unknown engine {settings.engine!r}",
            f"set XPUKIT_ENGINE (or invoke.yaml engine:) to one of: {', '.join(engine_mod.ENGINE_CHOICES)}",
        )
    return settings


def check_choice(option: str, value: str, choices: tuple[str, ...]) -> str:
    """A choice option's value, or a usage error (exit 2) listing the choices."""
    if value not in choices:
        raise UsageError(
            f"unknown {option} {value!r}",
            f"use --{option.replace('_', '-')} with one of: {', '.join(choices)}",
        )
    return value


def check_yaml_section(section: Any) -> Mapping[str, Any]:
    """invoke.yaml's ``xpukit:`` section: a mapping of known settings to plain values."""
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise XpukitError(
            f"invoke.yaml: xpukit: must be a mapping of settings, got {type(section).__name__}",
            "write `xpukit:` followed by indented `key: value` lines (see invoke.yaml)",
        )
    for key, value in section.items():
        if key not in SETTINGS:
            close = difflib.get_close_matches(str(key), SETTINGS, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise XpukitError(
                f"invoke.yaml: unknown setting xpukit.{key}", f"{hint}the settings are listed in docs/settings.md"
            )
        if not isinstance(value, str | int | float | bool) and value is not None:
            raise XpukitError(
                f"invoke.yaml: xpukit.{key} must be a plain value, got {type(value).__name__}",
                f"write xpukit.{key} as a string",
            )
    return {key: (None if value is None else str(value)) for key, value in section.items()}


def check_project_yaml(folder: Path) -> None:
    """invoke.yaml beside tasks.py, checked before invoke loads it (invoke would print a traceback)."""
    path = folder / "invoke.yaml"
    if not path.is_file():
        return
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise XpukitError(f"{path}: not UTF-8 text", f"save {path.name} as UTF-8") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise XpukitError(f"{path}: not valid YAML{where} ({problem})", f"fix the syntax of {path.name}") from None
    if data is None:
        return
    if not isinstance(data, Mapping):
        raise XpukitError(
            f"{path}: must be a mapping (e.g. `xpukit:` with settings under it), got {type(data).__name__}",
            f"rewrite {path.name} as `key: value` lines",
        )
    check_yaml_section(data.get("xpukit"))


@dataclasses.dataclass
class Context:
    """Settings plus every ``auto`` resolved once, on first use, with the reason printed once."""

    settings: Settings
    environ: Mapping[str, str] = dataclasses.field(default_factory=lambda: os.environ)
    detect_gpu: Callable[[], tuple[bool, str]] = gpu.has_intel_gpu
    say: Callable[[str], None] = ui.say
    _once: dict[str, Any] = dataclasses.field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def dry_run(self) -> bool:
        return self.settings.dry_run

    @property
    def debug(self) -> bool:
        return self.settings.debug

    @functools.cached_property
    def profile_choice(self) -> tuple[str, str]:
        """(cpu | xpu, why)."""
        choice = self.settings.profile
        if choice != "auto":
            return choice, "--profile / XPUKIT_PROFILE / invoke.yaml"
        found, reason = self.detect_gpu()
        chosen = "xpu" if found else "cpu"
        self.say(f"profile auto -> {chosen} ({reason})")
        return chosen, reason

    @property
    def profile(self) -> str:
        return self.profile_choice[0]

    @functools.cached_property
    def engine(self) -> engine_mod.Engine:
        """The container engine (Docker or podman), chosen once; ``auto``'s choice is said once."""
        s = self.settings
        found = engine_mod.resolve_engine(s.engine, s.docker_host, s.docker_cli, self.say)
        if s.engine == "auto" and found.kind == "podman":
            self.say(f"engine auto -> podman ({found.why})")
        return found

    def close(self) -> None:
        """The task's end: its engine's client, if one was opened, is closed (once)."""
        if "engine" in self.__dict__:
            self.engine.close()

    def once(self, key: str, make: Callable[[], Any]) -> Any:
        """What a subject resolves once per task and keeps with the task's context, made on first use
        (the CA bundle the build trusts: :func:`xpukit.host.image.trust.ca_bundle`)."""
        if key not in self._once:
            self._once[key] = make()
        return self._once[key]


def make_context(
    flags: Mapping[str, Any], yaml_config: Any = None, environ: Mapping[str, str] | None = None
) -> Context:
    environ = os.environ if environ is None else environ
    return Context(resolve(flags, yaml_config, environ), environ)
