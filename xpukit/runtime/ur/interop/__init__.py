"""The interop floor: everything that meets memory and devices the kit did not create (dpnp/dpctl
arrays, ``__sycl_usm_array_interface__`` objects, DLPack producers and consumers, SYCL queues and
native handles). It sits above the binding (``_api``, ``errors``, ``loader``) and below the objects
and the session (:mod:`xpukit.runtime.ur.objects`, :mod:`xpukit.runtime.ur.core`), which import it;
it imports neither (``tests/host/test_import_graph.py``).

* :mod:`.memory`: the one classifier, "whose memory is this", for every argument kind a launch takes.
* :mod:`.arrays`: foreign arrays' protocols read, UR's answers about their pointers.
* :mod:`.state`: a session's foreign memory and the adapter a launch with it goes through
  (:meth:`.state.ForeignState.run`: checks held, ranges lent, ordering with SYCL before and after).
* :mod:`.sycl`: native handles of a SYCL queue, libsycl entry points.
* :mod:`.export`: DLPack export of the kit's own memory.
"""
