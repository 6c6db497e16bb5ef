"""Turn a failed image build's log into one line naming the cause and its specific fix.

The log stays on screen above; this only reads its tail. Causes are checked most specific first:
a certificate error also prints connection errors, and a network error "no matching distribution".
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable


@dataclasses.dataclass(frozen=True)
class Diagnosis:
    cause: str  # short, e.g. "TLS certificate not trusted"
    evidence: str  # the log line that shows it, shortened
    fix: str


_CERT = re.compile(
    r"CERTIFICATE_VERIFY_FAILED|certificate verify failed|self[- ]signed certificate|"
    r"unable to get local issuer certificate|Certificate verification failed|server certificate verification failed",
    re.I,
)
_SPACE = re.compile(r"No space left on device|no space left", re.I)
_MISSING = (
    re.compile(r"No matching distribution found for (\S+)"),
    re.compile(r"Could not find a version that satisfies the requirement (\S+)"),
    re.compile(r"E: Unable to locate package (\S+)"),
    re.compile(r"E: Version '([^']+)' for '([^']+)' was not found"),
    re.compile(r"E: Package '([^']+)' has no installation candidate"),
)
_NETWORK = re.compile(
    r"Temporary failure in name resolution|Could not resolve|Name or service not known|ProxyError|"
    r"Tunnel connection failed|407 Proxy Authentication|Failed to establish a new connection|"
    r"Network is unreachable|Connection refused|Connection timed out|Read timed out|"
    # apt's words: no DNS at all (a sandbox without network), no route, and the update it ignored
    # (after which every package "is not available": that is the network, not a pin).
    r"Temporary failure resolving|Could not connect to|Unable to connect to|No route to host|"
    r"Some index files failed to download",
    re.I,
)


def _short(line: str, limit: int = 70) -> str:
    line = re.sub(r"^#\d+ [\d.]+ ", "", line.strip())  # BuildKit's "#12 3.45 " step prefix
    return line if len(line) <= limit else line[: limit - 3] + "..."


def diagnose(lines: Iterable[str], ca_description: str = "") -> Diagnosis | None:
    """The most specific known cause in a build log, or None when the log shows none."""
    lines = list(lines)

    def first(pattern: re.Pattern[str]) -> str | None:
        return next((line for line in lines if pattern.search(line)), None)

    hit = first(_CERT)
    if hit:
        trusted = f" (it trusted {ca_description})" if ca_description else ""
        return Diagnosis(
            "a TLS certificate was not trusted" + trusted,
            _short(hit),
            "pass the proxy's CA: --ca-bundle PATH or SSL_CERT_FILE=PATH (PEM)",
        )
    hit = first(_SPACE)
    if hit:
        return Diagnosis(
            "no space left on device",
            _short(hit),
            "free disk (`invoke clean --build-cache`, `docker system df`) or move Docker's data-root",
        )
    hit = first(_NETWORK)
    if hit:
        return Diagnosis(
            "the build could not reach the network (proxy or DNS)",
            _short(hit),
            "export HTTP_PROXY/HTTPS_PROXY (passed to the build), fix the engine's DNS, or give RUN steps the "
            "host's network (XPUKIT_BUILD_NETWORK=host)",
        )
    for pattern in _MISSING:
        hit = first(pattern)
        match = pattern.search(hit) if hit else None
        if hit and match:
            name = "=".join(reversed(match.groups())) if len(match.groups()) == 2 else match.group(1)
            return Diagnosis(
                f"package {name} is not available",
                _short(hit),
                "check that pin in env/pins.toml (the index or mirror lacks it), then `invoke pins --lock`",
            )
    return None
