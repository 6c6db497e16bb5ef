"""The interop floor's one classifier, "whose memory is this", for every argument kind a launch
takes: the kit's own memory and plain values, dpctl/dpnp arrays (told apart by their types' names,
as the classifier reads them, so no dpnp is needed here), other SUAI objects and DLPack producers."""

from __future__ import annotations

import numpy as np
import pytest

from xpukit.runtime.ur.core import Session  # noqa: F401  (binds the kit's memory types, as any use does)
from xpukit.runtime.ur.interop import memory
from xpukit.runtime.ur.objects import DeviceArray, USMAllocation

pytestmark = pytest.mark.unit


def _named(module: str, name: str, **body: object) -> type:
    """A class that looks like ``module.name`` to the classifier."""
    return type(name, (), {"__module__": module, **body})


SUAI = {"__sycl_usm_array_interface__": property(lambda self: {})}
DLPACK = {"__dlpack__": lambda self: None, "__dlpack_device__": lambda self: (14, 0)}


@pytest.mark.parametrize(
    ("t", "kind"),
    [
        (USMAllocation, memory.KIT),  # the kit's own memory speaks DLPack as an exporter: still the kit's
        (DeviceArray, memory.KIT),
        (int, memory.KIT),  # an address
        (bool, memory.KIT),
        (float, memory.KIT),
        (type(None), memory.KIT),
        (np.ndarray, memory.KIT),  # DLPack too, but host memory: the binder names the fix
        (str, memory.KIT),  # no array protocol: the checked launcher refuses it by name
        (_named("dpctl.tensor._usmarray", "usm_ndarray", **SUAI), memory.HELD),
        (_named("dpnp.tensor._usmarray", "usm_ndarray", **SUAI), memory.HELD),
        (_named("dpnp.dpnp_array", "dpnp_array", **SUAI), memory.WRAPPED),
        (_named("somelib", "Array", **SUAI), memory.PER_LAUNCH),
        (_named("somelib", "Producer", **DLPACK), memory.PER_LAUNCH),
        (_named("somelib", "HalfProducer", __dlpack__=lambda self: None), memory.KIT),  # no __dlpack_device__
    ],
)
def test_each_argument_kind_has_one_owner(t, kind):
    assert memory.memory_kind(t) == kind
    assert memory.ARG_KINDS[t] == kind  # decided once: the launch path reads the cached answer after


def test_a_usm_ndarray_without_weak_references_is_checked_per_launch():
    """Held arrays are let go through a weak reference: a type without one cannot be held."""
    t = _named("dpctl.tensor._usmarray", "usm_ndarray", __slots__=(), **SUAI)
    assert not t.__weakrefoffset__
    assert memory.memory_kind(t) == memory.PER_LAUNCH


def test_is_foreign_asks_the_same_classifier():
    producer = _named("somelib", "Producer", **DLPACK)()
    assert memory.is_foreign(producer) and not memory.is_foreign(3) and not memory.is_foreign(None)
