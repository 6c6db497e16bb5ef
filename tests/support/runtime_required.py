"""Skip a runtime test where the kit's runtime may legitimately be missing (a bare host), but fail
it inside the image, which must provide everything: CI must not skip what it can run."""

from __future__ import annotations

import os
from typing import Any

import pytest


def skip_unless_in_image(reason: str) -> None:
    if os.environ.get("XPUKIT_IN_CONTAINER") == "1":
        pytest.fail(f"the image must provide this, but: {reason}")
    pytest.skip(reason)


def ur_session_or_skip(device: str = "cpu"):
    """A UR session on ``device``, or a skip (a fail in the image) naming what is missing."""
    from xpukit.runtime import ur

    try:
        return ur.Session(device)
    except (ur.LoaderNotFound, ur.DeviceNotFound) as exc:
        skip_unless_in_image(f"no UR {device} device here: {exc.one_line()}")


def dpnp_or_skip() -> tuple[Any, Any]:
    """``(dpctl, dpnp)``, or the calling module skipped where dpnp is not installed (the default
    image has none); the dpnp image variant (``invoke build --with dpnp``) sets XPUKIT_REQUIRE_DPNP=1,
    so a missing dpnp fails there instead of skipping."""
    try:
        import dpctl
        import dpnp
    except ImportError as exc:
        if os.environ.get("XPUKIT_REQUIRE_DPNP") == "1":
            raise
        pytest.skip(f"dpnp is not installed ({exc}); the dpnp image variant runs these", allow_module_level=True)
    return dpctl, dpnp
