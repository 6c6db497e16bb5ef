"""Settings: command-line flag, then environment variable, then invoke.yaml, then default."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from xpukit.errors import XpukitError

PROFILE_CHOICES = ("auto", "cpu", "xpu")
WHERE_CHOICES = ("auto", "container", "host")

# setting -> (environment variable, default)
SETTINGS = {
    "profile": ("XPUKIT_PROFILE", "auto"),
    "image": ("XPUKIT_IMAGE", "xpukit"),
    "docker_cli": ("XPUKIT_DOCKER_CLI", "auto"),
    "docker_host": ("DOCKER_HOST", ""),
    "base_image": ("XPUKIT_BASE_IMAGE", ""),
    "ca_bundle": ("XPUKIT_CA_BUNDLE", ""),
    "cache_volume": ("XPUKIT_CACHE_VOLUME", "xpukit-cache"),
    "base_suite": ("XPUKIT_BASE_SUITE", "bookworm"),
    "base_mirror": ("XPUKIT_BASE_MIRROR", "http://deb.debian.org/debian"),
}


@dataclasses.dataclass
class Settings:
    profile: str = "auto"
    image: str = "xpukit"
    docker_cli: str = "auto"
    docker_host: str = ""
    base_image: str = ""
    ca_bundle: str = ""
    cache_volume: str = "xpukit-cache"
    base_suite: str = "bookworm"
    base_mirror: str = "http://deb.debian.org/debian"
    dry_run: bool = False
    debug: bool = False


def resolve(
    flags: Mapping[str, Any],
    yaml_config: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Merge the sources; a flag left as None falls through to the next source."""
    environ = os.environ if environ is None else environ
    yaml_config = yaml_config or {}
    values: dict[str, Any] = {}
    for key, (env_name, default) in SETTINGS.items():
        if flags.get(key) not in (None, ""):
            values[key] = flags[key]
        elif environ.get(env_name):
            values[key] = environ[env_name]
        elif yaml_config.get(key) not in (None, ""):
            values[key] = str(yaml_config[key])
        else:
            values[key] = default
    settings = Settings(**values, dry_run=bool(flags.get("dry_run")), debug=bool(flags.get("debug")))
    check_choice("profile", settings.profile, PROFILE_CHOICES)
    return settings


def check_choice(option: str, value: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise XpukitError(
            f"unknown {option} {value!r}",
            f"use --{option.replace('_', '-')} with one of: {', '.join(choices)}",
        )
    return value
