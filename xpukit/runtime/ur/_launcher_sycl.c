/* _launcher_sycl.c (part of _xpukit_launcher): a launch submitted to SYCL instead of enqueued on a
 * UR queue, for launches SYCL must order itself. A session opened over dpnp's SYCL queue shares that
 * queue's context and native queue; a kernel the kit enqueued there behind SYCL's back would be
 * invisible to SYCL's scheduler (its host tasks, its in-order queue's last event), so a launch on
 * dpnp's arrays goes through the same kernel built by SYCL (via_sycl(), made once per kernel and
 * session by xpukit/runtime/ur/interop/state.py) and DPCTLQueue_SubmitNDRange on the session's
 * in-order SYCL queue: SYCL orders it after everything submitted before and everything after it,
 * host tasks included. The arguments are checked exactly as for a UR launch (launch_prepare).
 * dpctl's functions are pointers handed over by via_sycl(): nothing here links against SYCL.
 */
#include "_launcher_internal.h"

/* via_sycl(kernel_ref, queue_ref, submit, event_delete, keep): dpctl's sycl::kernel* and
 * sycl::queue* (addressof_ref()), DPCTLQueue_SubmitNDRange and DPCTLEvent_Delete, and the Python
 * objects that own the first two (held while the Launcher is). */
PyObject *launcher_via_sycl(Launcher *l, PyObject *args) {
    PyObject *kernel, *queue, *submit, *del, *keep;
    if (!PyArg_ParseTuple(args, "OOOOO", &kernel, &queue, &submit, &del, &keep)) return NULL;
    void *k = fnptr(kernel), *q = fnptr(queue), *s = fnptr(submit), *d = fnptr(del);
    if (PyErr_Occurred()) return NULL;
    if (!k || !q || !s || !d) return PyErr_Format(PyExc_ValueError, "via_sycl: a null kernel, queue or dpctl function");
    Py_INCREF(keep);
    Py_XSETREF(l->sycl_keep, keep);
    l->sycl_kernel = k;
    l->sycl_queue = q;
    l->sycl_submit = s;
    l->sycl_event_delete = d;
    Py_RETURN_NONE;
}

/* launch_prepare's checks, then one DPCTLQueue_SubmitNDRange: pointers as USM pointers, every other
 * value as the unsigned integer of its size (its bytes, as UR gets them), the hidden arguments after
 * them, the grid as SYCL ranges (SYCL's dimension 0 is the native last: reversed when 3). */
PyObject *launch_sycl(Launcher *l, const size_t *g, PyObject *const *items, Py_ssize_t n, const pre_t *pre,
                      uint64_t checked_generation) {
    if (!l->sycl_kernel) return PyErr_Format(PyExc_RuntimeError, "xpukit: launch_sycl without via_sycl");
    uint64_t vals[MAX_PARAMS];
    size_t sizes[MAX_PARAMS];
    int rc = launch_prepare(l, g, items, n, pre, checked_generation, vals, sizes);
    if (rc < 0) return NULL;
    if (rc) Py_RETURN_NONE;
    void *argv[MAX_PARAMS + MAX_HIDDEN];
    int types[MAX_PARAMS + MAX_HIDDEN];
    dpctl_local_accessor local[MAX_HIDDEN];
    for (Py_ssize_t i = 0; i < n; i++) {
        if (l->kinds[i] == 'P') {
            argv[i] = (void *)(uintptr_t)vals[i];
            types[i] = DPCTL_VOID_PTR;
        } else {
            argv[i] = &vals[i]; /* little-endian: the value's bytes first */
            types[i] = sizes[i] == 1 ? DPCTL_UINT8 : sizes[i] == 2 ? DPCTL_UINT16 : sizes[i] == 4 ? DPCTL_UINT32 : DPCTL_UINT64;
        }
    }
    for (Py_ssize_t j = 0; j < l->nhidden; j++) {
        if (l->hidden_kinds[j] == 'P') {
            argv[n + j] = (void *)(uintptr_t)l->hidden_values[j];
            types[n + j] = DPCTL_VOID_PTR;
        } else {
            local[j] = (dpctl_local_accessor){1, DPCTL_UINT8, (size_t)l->hidden_values[j], 1, 1};
            argv[n + j] = &local[j];
            types[n + j] = DPCTL_LOCAL_ACCESSOR;
        }
    }
    size_t global[3] = {g[0] * l->local[0], g[1] * l->local[1], g[2] * l->local[2]}, gr[3], lr[3];
    size_t ndims = 1;
    if (global[1] == 1 && global[2] == 1 && l->local[1] == 1 && l->local[2] == 1) {
        gr[0] = global[0], gr[1] = gr[2] = 1;
        lr[0] = l->local[0], lr[1] = lr[2] = 1;
    } else {
        ndims = 3;
        for (int i = 0; i < 3; i++) gr[i] = global[2 - i], lr[i] = l->local[2 - i];
    }
    void *event = ((dpctl_submit_fn)l->sycl_submit)(l->sycl_kernel, l->sycl_queue, argv, types,
                                                    (size_t)(n + l->nhidden), gr, lr, ndims, NULL, 0);
    if (!event)
        return PyErr_Format(PyExc_RuntimeError,
                            "xpukit: SYCL refused the launch (DPCTLQueue_SubmitNDRange gave no event; dpctl's message is above)");
    ((dpctl_delete_fn)l->sycl_event_delete)(event); /* the queue is in order: SYCL keeps what it needs */
    Py_RETURN_NONE;
}
