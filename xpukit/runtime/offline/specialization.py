"""What a launch tells Triton about its arguments, as the kernel report compiles it.

A launch specializes a Triton kernel on its arguments: a pointer 16-byte aligned and an int divisible
by 16 get ``tt.divisibility = 16`` (Triton's ``attrs``), an int equal to 1 becomes the constant 1.
The same kernel compiled without that knowledge is another program (a block-pointer GEMM loses its
2D block loads), so every report row says which specialization it compiled:

- ``declared``: the signature carries hints in Triton's AOT notation (``triton/tools/compile.py``:
  ``x_ptr:*fp16:16``, ``K:i32:16``, ``stride:i32:1``; "Only 1 and 16 are valid hints"), and exactly
  those hints are compiled, as Triton's AOT tool does;
- ``default``: no hint anywhere: every pointer is taken as 16-byte aligned, because every allocation
  a launch through the kit gets (the kit's own, UR USM, dpnp) is at least 64-byte aligned; ints are
  assumed nothing. Parameters marked ``do_not_specialize``/``do_not_specialize_on_alignment`` are
  left out, as a launch leaves them;
- ``launch``: read off a real launch (``kernel-report --launched-by``).

Plain Python: the host's unit tests read it without Triton.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from xpukit.errors import XpukitError

SOURCES = ("declared", "default", "launch")
HINTS = (1, 16)
_INT_TYPES = frozenset({"i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"})
# The scalar types Triton 3.3's ``str_to_ty`` reads; a pointer is ``*`` (``*k``: const) before a type.
_SCALAR_TYPES = _INT_TYPES | {"i1", "u1", "B", "fp16", "bf16", "fp32", "fp64"}
_SCALAR_TYPES |= {"fp8e4nv", "fp8e4b8", "fp8e5", "fp8e5b16", "fp8e4b15"}


@dataclasses.dataclass(frozen=True)
class Specialization:
    """Which arguments a compile takes as 16-aligned, divisible by 16 or equal to 1."""

    source: str  # one of SOURCES
    aligned_16: tuple[str, ...] = ()  # pointers known 16-byte aligned
    divisible_16: tuple[str, ...] = ()  # ints known divisible by 16
    equal_1: tuple[str, ...] = ()  # ints equal to 1: compiled as the constant 1

    @property
    def divisibility(self) -> tuple[str, ...]:
        """The arguments Triton gets ``tt.divisibility = 16`` for (pointers and ints alike)."""
        return self.aligned_16 + self.divisible_16

    def constants(self) -> dict[str, int]:
        return {name: 1 for name in self.equal_1}

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "aligned_16": list(self.aligned_16),
            "divisible_16": list(self.divisible_16),
            "equal_1": list(self.equal_1),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Specialization:
        return cls(
            str(data["source"]),
            tuple(data.get("aligned_16", ())),
            tuple(data.get("divisible_16", ())),
            tuple(data.get("equal_1", ())),
        )

    def describe(self) -> str:
        """One short line: ``declared: 16-aligned a_ptr, b_ptr; divisible by 16: M, K; equal to 1: stride_ak``."""
        parts = []
        if self.aligned_16:
            parts.append("16-aligned " + ", ".join(self.aligned_16))
        if self.divisible_16:
            parts.append("divisible by 16: " + ", ".join(self.divisible_16))
        if self.equal_1:
            parts.append("equal to 1: " + ", ".join(self.equal_1))
        what = "; ".join(parts) or "nothing known of the arguments"
        if self.source == "default":
            what += " (no hints declared: pointers taken as 16-aligned, as the kit's allocations are)"
        return f"{self.source}: {what}"


def split_hints(text: str) -> tuple[dict[str, str], dict[str, int]]:
    """``"x_ptr:*fp16:16, n:i32:1"`` -> ({name: type}, {name: hint}); a hint other than 1 or 16, or
    on a type it cannot apply to, is a one-line error."""
    types: dict[str, str] = {}
    hints: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, rest = (s.strip() for s in item.partition(":"))
        ty, hint_sep, hint_text = (s.strip() for s in rest.partition(":"))
        if not sep or not name or not ty or (hint_sep and not hint_text):
            raise XpukitError(
                f"malformed signature entry {item!r}",
                "write name:type pairs separated by commas, each with an optional :16 or :1 hint, e.g. 'x:*fp32:16,n:i32'",  # noqa: E501
            )
        if name in types:
            raise XpukitError(f"{name} appears twice in the signature", f"give {name} one type (and one hint)")
        _check_type(name, ty)
        types[name] = ty
        if hint_sep:
            hints[name] = _check_hint(name, ty, hint_text)
    return types, hints


def _check_type(name: str, ty: str) -> None:
    if ty == "constexpr":
        raise XpukitError(f"{name}:constexpr in the signature", f"give a constexpr its value: --constexpr {name}=VALUE")
    scalar = ty.lstrip("*")
    if ty.startswith("*") and scalar.startswith("k"):
        scalar = scalar[1:]
    if scalar not in _SCALAR_TYPES:
        raise XpukitError(
            f"unknown type {ty!r} for {name}",
            f"use one of Triton's: {', '.join(sorted(_SCALAR_TYPES))}, or a pointer to one (*fp32)",
        )


def _check_hint(name: str, ty: str, text: str) -> int:
    try:
        hint = int(text)
    except ValueError:
        hint = 0
    if hint not in HINTS:
        raise XpukitError(
            f"hint {text!r} on {name} is not 1 or 16", "write :16 (aligned / divisible by 16) or :1 (equal to 1)"
        )
    if ty.startswith("*") and hint != 16:
        raise XpukitError(f"hint :{hint} on pointer {name}", "a pointer takes only :16 (16-byte aligned)")
    if not ty.startswith("*") and ty not in _INT_TYPES:
        raise XpukitError(f"hint :{hint} on {name} of type {ty}", "hints apply to pointers and integer arguments only")
    return hint


def declared(hints: Mapping[str, int], types: Mapping[str, str]) -> Specialization:
    """The hints as written (Triton's AOT semantics: nothing is assumed of an unhinted argument)."""
    return Specialization(
        "declared",
        tuple(n for n, h in hints.items() if h == 16 and types[n].startswith("*")),
        tuple(n for n, h in hints.items() if h == 16 and not types[n].startswith("*")),
        tuple(n for n, h in hints.items() if h == 1),
    )


def default(types: Mapping[str, str], params: Iterable[Any] = ()) -> Specialization:
    """Every pointer 16-aligned but those a launch would not specialize (``params``: Triton's
    KernelParam list, read for ``do_not_specialize`` and ``do_not_specialize_on_alignment``)."""
    exempt = {
        getattr(p, "name", None)
        for p in params
        if getattr(p, "do_not_specialize", False) or getattr(p, "do_not_specialize_on_alignment", False)
    }
    return Specialization("default", tuple(n for n, ty in types.items() if ty.startswith("*") and n not in exempt))


def for_signature(text: str, params: Iterable[Any] = ()) -> tuple[dict[str, str], Specialization]:
    """A signature's types and the specialization to compile: ``declared`` when it has a hint."""
    types, hints = split_hints(text)
    return types, declared(hints, types) if hints else default(types, params)


def unknown_block_io(spec: Specialization, types: Mapping[str, str], constexprs: Sequence[str]) -> tuple[str, ...]:
    """Arguments whose alignment, divisibility or unit stride the compile does not know: what a
    block load needs to become a 2D block load. Pointers not aligned, ints neither divisible by 16
    nor equal to 1."""
    known = set(spec.aligned_16) | set(spec.divisible_16) | set(spec.equal_1) | set(constexprs)
    return tuple(n for n, ty in types.items() if n not in known and (ty.startswith("*") or ty in _INT_TYPES))
