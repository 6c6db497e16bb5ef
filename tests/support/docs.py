"""Helpers the test_docs.py modules of several test folders share."""

from __future__ import annotations

import re

from tests.support import ROOT


def normalise(line: str) -> str:
    """A printed line modulo what differs per machine and run: timings, counts, hashes, paths, the CPU."""
    line = re.sub(r"xpukit:(cpu|xpu)-[0-9a-f]{12}", r"xpukit:\1-<tag>", line)
    line = re.sub(r"/tmp/[\w.-]+", "<tmp>", line)
    line = re.sub(r" at /\S*ocloc\)", " at <ocloc>)", line)  # where ocloc lives: the image's or XPUKIT_OCLOC's
    line = re.sub(r"^device: .*? \[", "device: <device> [", line)
    line = re.sub(r"\d+(\.\d+)*", "<n>", line)
    return " ".join(line.split())


HOST_DEPENDENT = (
    "xpukit: ca-bundle:",
    "xpukit: warning:",
    "xpukit: base:",
    "xpukit: profile auto",
    "xpukit: image ",  # ... is missing; building it
    "xpukit: building",
    "xpukit: build:",
)


def assert_sample_matches(sample: list[str], printed: list[str]) -> None:
    """Every sample line is printed, in order (modulo normalise), and every kit line printed is shown;
    a host-dependent line only has to be printed somewhere (where settings are resolved varies)."""
    got = [normalise(ln) for ln in printed if ln.strip()]
    position = 0
    for line in sample:
        want = normalise(line)
        if line.startswith(HOST_DEPENDENT):
            assert want in got, f"the sample shows {line!r}, which the command does not print"
            continue
        assert want in got[position:], f"the sample shows {line!r}, which the command does not print:\n" + "\n".join(
            got
        )
        position = got.index(want, position) + 1
    shown = {normalise(ln) for ln in sample}
    for line in printed:
        if line.startswith("xpukit: ") and not line.startswith(HOST_DEPENDENT):
            assert normalise(line) in shown, f"the command prints {line!r}, which the sample leaves out"


def sample_after(doc: str, marker: str) -> list[str]:
    """The lines of the first fenced block after the line containing ``marker``."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    rest = text[text.index(marker) :]
    block = re.search(r"```\w*\n(.*?)```", rest, re.DOTALL)
    assert block, f"{doc}: no fenced block after {marker!r}"
    return block.group(1).splitlines()
