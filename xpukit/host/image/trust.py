"""Which CA bundle the image build trusts: by default, what the host itself trusts.

A TLS-intercepting proxy works on the host because the host trusts its CA; the build only works
if the same bundle reaches it (as a BuildKit secret, never a layer). ``auto`` picks, in order:
SSL_CERT_FILE, REQUESTS_CA_BUNDLE, pip's configured ``cert`` (PIP_CERT or pip.conf), else the OS
bundle. ``none`` opts out; any other value is a path.
"""

from __future__ import annotations

import configparser
import dataclasses
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from xpukit.errors import XpukitError
from xpukit.host.settings import Context

# The OS trust stores, Debian/Ubuntu first, then Fedora/RHEL, then Alpine/macOS-style.
OS_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem")


@dataclasses.dataclass(frozen=True)
class CaBundle:
    """The bundle to pass (``path`` empty for none) and where it came from, for one line of output."""

    path: str
    source: str

    def describe(self) -> str:
        return f"ca-bundle: {self.path} ({self.source})" if self.path else f"ca-bundle: none ({self.source})"


def pip_config_files(environ: Mapping[str, str], home: Path, prefix: str = sys.prefix) -> list[Path]:
    """pip's config files, lowest precedence first (pip's global, user, site order)."""
    if environ.get("PIP_CONFIG_FILE"):
        return [Path(environ["PIP_CONFIG_FILE"])]
    xdg_dirs = (environ.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(":")
    config_home = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
    return [
        *(Path(d) / "pip" / "pip.conf" for d in reversed(xdg_dirs)),
        Path("/etc/pip.conf"),
        home / ".pip" / "pip.conf",
        config_home / "pip" / "pip.conf",
        Path(prefix) / "pip.conf",
    ]


def pip_cert(environ: Mapping[str, str], files: list[Path]) -> str:
    """pip's ``cert`` setting: PIP_CERT, else the last config file's [install] or [global] cert."""
    if environ.get("PIP_CERT"):
        return environ["PIP_CERT"]
    found = ""
    for file in files:
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read(file, encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError, OSError):
            continue  # pip itself would complain about this file; the next source decides
        for section in ("global", "install"):
            if parser.has_option(section, "cert"):
                found = parser.get(section, "cert").strip()
    return found


def resolve_ca_bundle(
    setting: str,
    environ: Mapping[str, str] | None = None,
    pip_files: list[Path] | None = None,
    os_bundles: tuple[str, ...] = OS_BUNDLES,
) -> CaBundle:
    """The bundle for ``setting`` (auto | none | a path), with the reason it was picked."""
    environ = os.environ if environ is None else environ
    setting = setting or "auto"
    if setting == "none":
        return CaBundle("", "--ca-bundle none: the build trusts only the base image's CAs")
    if setting != "auto":
        path = Path(setting).expanduser()
        if not path.is_file():
            raise XpukitError(
                f"CA bundle {setting} does not exist",
                "pass the path of a PEM file to --ca-bundle, or auto (the host's trust store) or none",
            )
        return CaBundle(str(path.resolve()), "--ca-bundle")
    if pip_files is None:
        pip_files = pip_config_files(environ, Path(environ.get("HOME") or Path.home()))
    candidates = [
        (environ.get("SSL_CERT_FILE", ""), "SSL_CERT_FILE"),
        (environ.get("REQUESTS_CA_BUNDLE", ""), "REQUESTS_CA_BUNDLE"),
        (pip_cert(environ, pip_files), "pip's cert setting"),
        *((path, "the OS trust store") for path in os_bundles),
    ]
    skipped: list[str] = []
    for value, source in candidates:
        if not value:
            continue
        if Path(value).is_file():
            note = f"; skipped {', '.join(skipped)}" if skipped else ""
            return CaBundle(str(Path(value).resolve()), f"auto: {source}{note}")
        if source != "the OS trust store":
            skipped.append(f"{source} {value} (missing)")
    return CaBundle("", "auto: the host has no CA bundle file; the build trusts only the base image's CAs")


def ca_bundle(ctx: Context) -> CaBundle:
    """The CA bundle the build (and the tests that fetch) trust: resolved once per task, said in one line."""

    def resolve() -> CaBundle:
        bundle = resolve_ca_bundle(ctx.settings.ca_bundle, ctx.environ)
        ctx.say(bundle.describe())
        return bundle

    found: CaBundle = ctx.once("ca_bundle", resolve)
    return found
