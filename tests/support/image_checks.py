"""Checks on image contents shared by the Docker and podman image tests."""

from __future__ import annotations

from collections.abc import Iterable


def needles_in_stream(chunks: Iterable[bytes], needles: list[bytes]) -> set[bytes]:
    """Which needles occur anywhere in a byte stream (chunk borders included)."""
    keep = max(len(n) for n in needles)
    found: set[bytes] = set()
    tail = b""
    for chunk in chunks:
        window = tail + chunk
        found.update(n for n in needles if n in window)
        tail = window[-keep:]
    return found
