"""Helpers the test_zebin.py modules of several test folders share."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from xpukit.runtime.offline.zebin import Zebin, ZebinError, read_zebin

YAML_JUNK = st.sampled_from(
    [
        "",
        ":",
        "- ",
        "[",
        "]",
        "{",
        "}",
        "\t",
        "\n",
        "&a ",
        "*a",
        "!!python/object:os.system ",
        "'",
        '"',
        "?",
        "0x",
    ]
)


@st.composite
def mutations(draw: st.DrawFn, base: bytes, ze_info: tuple[int, int]) -> bytes:
    """Byte flips anywhere (biased to the ELF header, section headers and .ze_info), YAML-token
    splices inside .ze_info, and truncation."""
    data = bytearray(base)
    start, end = ze_info
    regions = st.one_of(
        st.integers(0, 63),
        st.integers(max(0, len(data) - 64 * 8), len(data) - 1),
        st.integers(start, max(start, end - 1)),
        st.integers(0, len(data) - 1),
    )
    for _ in range(draw(st.integers(0, 6))):
        data[draw(regions)] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        pos = draw(st.integers(start, max(start, end - 1)))
        data[pos:pos] = draw(YAML_JUNK).encode()
    if draw(st.integers(0, 3)) == 0:
        data = data[: draw(st.integers(0, len(data)))]
    return bytes(data)


def assert_reader_contract(data: bytes) -> None:
    try:
        result = read_zebin(data)
    except ZebinError as exc:
        assert exc.one_line()
        return
    assert isinstance(result, Zebin)
    for kernel in result.kernels:
        kernel.explicit_args()


def ze_info_span(data: bytes) -> tuple[int, int]:
    start = data.index(b"---\nversion")
    return start, data.index(b"...", start) + 3


FUZZ = settings(
    max_examples=4000,
    deadline=None,
    database=None,  # the source tree may be read-only: no .hypothesis directory
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
