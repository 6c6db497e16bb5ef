"""The zebin stage: the same assertions on Triton with upstream's stage (9e23713 line, xpu profile).

The tests that run on the host, with no engine; the others are in tests/image/test_zebin_stage.py.
"""

from __future__ import annotations

import pytest

from xpukit.runtime.triton import zebin_stage


class _NativeByMethod:
    @staticmethod
    def make_zebin(src, metadata, options, device_arch):  # pragma: no cover - never called
        return b""

    def add_stages(self, stages, options, language=None):  # pragma: no cover
        pass


class _NativeBySource:
    def add_stages(self, stages, options, language=None):  # pragma: no cover
        if options.generate_native_code:
            stages["zebin"] = lambda src, metadata: src


class _Without:
    def add_stages(self, stages, options):  # pragma: no cover
        stages["spv"] = lambda src, metadata: src


@pytest.mark.unit
@pytest.mark.parametrize("cls", [_NativeByMethod, _NativeBySource])
def test_native_stage_is_detected_and_left_alone(cls):
    original = cls.add_stages
    assert zebin_stage.native_stage_present(cls)
    assert zebin_stage.install(cls) == "native"
    assert cls.add_stages is original


@pytest.mark.unit
def test_missing_stage_is_detected():
    assert not zebin_stage.native_stage_present(_Without)
