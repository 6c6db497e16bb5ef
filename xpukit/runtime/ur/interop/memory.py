"""Whose memory is this: the one classifier the launch door asks about each argument's type
(``kernel[grid]``'s Python door in :mod:`xpukit.runtime.triton.fast_table`, and the adapter in
:mod:`.state`, which read the answers cached in :data:`ARG_KINDS`).

* :data:`KIT`: the kit's own memory (``USMAllocation``, ``DeviceArray``), an address (an ``int``),
  ``None``, a scalar, a host array or anything else that speaks no device-array protocol: the kit's
  checked launcher takes it (and refuses what is not live memory of the session, by name).
* :data:`HELD`: a dpctl/dpnp ``usm_ndarray``: it can change neither pointer, dtype, extent nor
  queue, so it is checked once per object and held while it lives (:mod:`.state`).
* :data:`WRAPPED`: a dpnp array: through the ``usm_ndarray`` it wraps, resolved on every launch.
* :data:`PER_LAUNCH`: any other ``__sycl_usm_array_interface__`` object or DLPack producer: checked
  and lent per launch.
"""

from __future__ import annotations

KIT = 0
HELD = 1
WRAPPED = 2
PER_LAUNCH = 3

# An argument type's answer, decided once per type (0 is the kit's: a plain truth test says "foreign").
ARG_KINDS: dict[type, int] = {}

# Types whose objects never change pointer, dtype, extent or queue: checked once per object.
_IMMUTABLE = {("dpctl.tensor._usmarray", "usm_ndarray"), ("dpnp.tensor._usmarray", "usm_ndarray")}
_WRAPPERS = {("dpnp.dpnp_array", "dpnp_array")}  # hold one in ._array_obj (resolved per launch)
# The kit's own memory types (and the scalars an argument may be): given by xpukit.runtime.ur.core
# at import, which sits above this floor (bind_kit_types).
_KIT_TYPES: tuple[type, ...] = (int, float)


def bind_kit_types(*types: type) -> None:
    """The kit's own memory types (they speak DLPack too, as exporters): :data:`KIT`, never foreign."""
    global _KIT_TYPES
    _KIT_TYPES = (int, float, *types)
    ARG_KINDS.clear()


def _speaks_array_protocol(t: type) -> bool:
    return hasattr(t, "__sycl_usm_array_interface__") or (hasattr(t, "__dlpack__") and hasattr(t, "__dlpack_device__"))


def memory_kind(t: type) -> int:
    """Whose memory an argument of type ``t`` is: :data:`KIT`, :data:`HELD`, :data:`WRAPPED` or
    :data:`PER_LAUNCH` (decided once per type; the hot path reads :data:`ARG_KINDS` first)."""
    k = ARG_KINDS.get(t)
    if k is None:
        # numpy arrays speak DLPack too, but are host memory: the binder's own error names the fix
        if issubclass(t, _KIT_TYPES) or (t.__module__ or "").startswith("numpy") or not _speaks_array_protocol(t):
            k = KIT
        else:
            name = (t.__module__, t.__name__)
            k = HELD if name in _IMMUTABLE and t.__weakrefoffset__ else WRAPPED if name in _WRAPPERS else PER_LAUNCH
        ARG_KINDS[t] = k
    return k


def is_foreign(value: object) -> bool:
    """Whether ``value`` is memory of another runtime (dpnp/dpctl, SUAI, DLPack), not the kit's."""
    return memory_kind(type(value)) != KIT


__all__ = ["ARG_KINDS", "HELD", "KIT", "PER_LAUNCH", "WRAPPED", "bind_kit_types", "is_foreign", "memory_kind"]
