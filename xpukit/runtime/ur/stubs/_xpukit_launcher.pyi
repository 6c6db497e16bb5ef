# The compiled UR launch path (../_launcher.c and its parts ../_launcher_*.c), as the type checker
# sees it. mypy reads this through mypy_path in pyproject.toml; tests/image/test_launcher_stub.py
# checks that it names exactly what the compiled module exports, so a name added or dropped in the C
# fails a test. Its capsule _C_API (read by _xpukit_dispatch's C, never by Python) is left out.
from collections.abc import Callable, Sequence
from typing import Any, Final, final

ABI: Final[int]

@final
class AllocTable:
    @property
    def generation(self) -> int: ...
    def add(self, start: int, size: int, /) -> None: ...
    def remove(self, start: int, /) -> bool: ...
    def find(self, addr: Any, /) -> tuple[int, int] | None: ...
    def __len__(self) -> int: ...

@final
class Launcher:
    def __init__(
        self,
        kernel: int,
        form: int,
        fns: tuple[int, int, int, int],
        kinds: str,
        local: tuple[int, int, int],
        table: AllocTable,
        on_arg_error: Callable[[int, int, Any], None],
        on_ur_error: Callable[[int, str], None],
        /,
    ) -> None: ...
    def launch(self, queue: int, gx: Any, gy: Any, gz: Any, args: Sequence[Any], want_event: bool = ..., /) -> Any: ...
    def close(self) -> None: ...
    def forget(self) -> None: ...
    def hidden(self, entries: Sequence[tuple[str, int]], /) -> None: ...

def bind(reads: dict[str, str], allocation_type: type, array_type: type, /) -> None: ...
