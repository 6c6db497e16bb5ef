"""Fixtures for the tests that run inside the image (marker `container`)."""

from __future__ import annotations

import pytest

from tests.support.runtime_required import ur_session_or_skip


@pytest.fixture(scope="module")
def session():
    """A UR session on the CPU device for one test module, closed after it."""
    s = ur_session_or_skip()
    yield s
    s.close()
