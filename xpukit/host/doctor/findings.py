"""One line per finding: what ``invoke doctor`` reports, on the host and in an image."""

from __future__ import annotations

import dataclasses

STATUSES = ("ok", "warn", "fail", "skip")


@dataclasses.dataclass(frozen=True)
class Finding:
    status: str  # one of STATUSES
    check: str  # short name, e.g. "engine", "gpu", "ur-devices"
    found: str
    fix: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")

    def line(self) -> str:
        text = f"{self.status.upper():<4}  {self.check:<12} {self.found}"
        return f"{text}  -> fix: {self.fix}" if self.fix and self.status in ("warn", "fail") else text
