# Triton's compiled launch path (../_dispatch.c and its parts ../_dispatch_*.c), as the type checker
# sees it. mypy reads this through mypy_path in pyproject.toml; tests/image/test_launcher_stub.py
# checks that it names exactly what the compiled module exports, so a name added or dropped in the C
# fails a test.
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, Final, final

from _xpukit_launcher import AllocTable, Launcher

ABI: Final[int]

@final
class _GridCall:  # what Dispatch[grid] returns; the module does not export it
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

@final
class Dispatch:
    def __init__(
        self, fn: Any, hits: dict[Any, Any], modes: bytes, current: ContextVar[Any], compiled_kernel: Any, /
    ) -> None: ...
    def __getitem__(self, grid: Any, /) -> _GridCall: ...
    def forget(self) -> None: ...

@final
class Direct:
    def __new__(cls, launcher: Launcher, queue: Any, fallback: Callable[..., Any], /) -> Direct: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

def bind(reads: dict[str, str | int], /) -> None: ...
def fast_key(
    args: tuple[Any, ...], kwargs: dict[str, Any] | None, modes: bytes, table: AllocTable, /
) -> tuple[Any, ...] | None: ...
