/* _xpukit_dispatch: Triton's launch path in C, built on the UR launcher (_xpukit_launcher).
 *
 * fast_key: a specialization key at least as fine as Triton's; Dispatch: kernel[grid](...) for a
 * call seen before, in one C call; Direct: BoundKernel.launch for its common call. Each has a
 * Python twin (xpukit/runtime/triton/fast_table.py, xpukit/runtime/triton/launch.py) with the same
 * behaviour; the tests run both. Everything UR (the argument checks, the allocation table, the
 * enqueue) is the launcher's, reached through its capsule (_launcher.h), never copied here. What
 * it reads from Python objects is named by xpukit/runtime/triton/seam.py and handed over by bind()
 * (below), once, when xpukit.runtime.triton.dispatch loads the module.
 * Parts (_dispatch.h): this file (the module, bind(), Direct), _dispatch_grid.c (Dispatch and
 * GridCall), _dispatch_key.c (fast_key and key matching), _dispatch_shared.c (what they all use).
 * Each calls only the ones after it. It knows only the kit's memory: an argument whose address it
 * cannot read gives no key, and the call goes to the Python door.
 */
#include "_dispatch.h"

/* the attribute sites of Direct */
static attr_site site_queue_handle, site_queue_closed;

/* ------------------------------------------------------------------ Direct */

/* BoundKernel.launch in C for its common call, bk.launch((gx[, gy[, gz]]), *args) with no keyword
 * (any scratch is grown by the launcher itself): the same steps as the Python method (the queue's
 * handle, the kernel's checked launcher) without its frame. Every other call (a callable or list grid,
 * queue= or event=, a closed queue) is that Python method (fallback), which raises the kit's errors.
 * Direct(launcher, queue, fallback). */
typedef struct {
    PyObject_HEAD
    PyObject *launcher, *queue, *fallback;
    vectorcallfunc vectorcall;
} Direct;

static PyObject *direct_fallback(Direct *d, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    return PyObject_Vectorcall(d->fallback, args, nargsf, kwnames);
}

static PyObject *direct_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Direct *d = (Direct *)self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if ((kwnames && PyTuple_GET_SIZE(kwnames)) || nargs < 1) return direct_fallback(d, args, nargsf, kwnames);
    PyObject *grid = args[0];
    Py_ssize_t gn = PyTuple_CheckExact(grid) ? PyTuple_GET_SIZE(grid) : 0;
    if (gn < 1 || gn > 3) return direct_fallback(d, args, nargsf, kwnames);
    /* h = q.raw_handle; if h is None or q.closed: the property raises (the Python method) */
    PyObject *h = inst_attr(&site_queue_handle, d->queue, N(QUEUE_HANDLE));
    if (!h || h == Py_None || !PyLong_CheckExact(h) || truthy_attr(&site_queue_closed, d->queue, N(QUEUE_CLOSED))) {
        PyErr_Clear();
        Py_XDECREF(h);
        return direct_fallback(d, args, nargsf, kwnames);
    }
    Launcher *l = (Launcher *)d->launcher;
    /* from here on, launcher.launch(h, *grid, args) */
    if (!l->kernel) {
        Py_DECREF(h);
        return ur->arg_error(l, -1, ARG_CLOSED, Py_None);
    }
    void *queue = fnptr(h);
    Py_DECREF(h);
    if (!queue) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "null queue handle");
        return NULL;
    }
    size_t g[3];
    if (grid_sizes(l, grid, gn, g) < 0) return NULL;
    /* args stay alive for the call (the caller's), and a vectorcall's array does not move */
    return ur->launch_core(l, queue, g, args + 1, nargs - 1, 0, NULL, l->table->generation);
}

static PyObject *direct_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *launcher, *queue, *fallback;
    if (kw && PyDict_GET_SIZE(kw)) return PyErr_Format(PyExc_TypeError, "Direct takes positional arguments only");
    if (!N(ACTIVE_SESSION))
        return PyErr_Format(PyExc_RuntimeError, "_xpukit_dispatch.bind() has not been called (xpukit.runtime.triton.dispatch calls it)");
    if (!PyArg_ParseTuple(args, "O!OO", ur->launcher_type, &launcher, &queue, &fallback)) return NULL;
    if (!PyCallable_Check(fallback)) return PyErr_Format(PyExc_TypeError, "fallback must be callable");
    Direct *d = PyObject_GC_New(Direct, type);
    if (!d) return NULL;
    d->launcher = Py_NewRef(launcher);
    d->queue = Py_NewRef(queue);
    d->fallback = Py_NewRef(fallback);
    d->vectorcall = direct_vectorcall;
    PyObject_GC_Track(d);
    return (PyObject *)d;
}

static int direct_traverse(Direct *d, visitproc visit, void *arg) {
    Py_VISIT(d->launcher);
    Py_VISIT(d->queue);
    Py_VISIT(d->fallback);
    return 0;
}

static int direct_clear(Direct *d) {
    Py_CLEAR(d->launcher);
    Py_CLEAR(d->queue);
    Py_CLEAR(d->fallback);
    return 0;
}

static void direct_dealloc(Direct *d) {
    PyObject_GC_UnTrack(d);
    direct_clear(d);
    Py_TYPE(d)->tp_free((PyObject *)d);
}

static PyObject *direct_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    /* a cleared Direct (a collected cycle) has nothing to call */
    if (!((Direct *)self)->launcher) return PyErr_Format(PyExc_RuntimeError, "xpukit: launch after release");
    return PyVectorcall_Call(self, args, kwargs);
}

PyTypeObject DirectType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_xpukit_dispatch.Direct",
    .tp_basicsize = sizeof(Direct),
    .tp_dealloc = (destructor)direct_dealloc,
    .tp_vectorcall_offset = offsetof(Direct, vectorcall),
    .tp_call = direct_call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "BoundKernel.launch(grid, *args) in C for a tuple grid and no keywords; else the Python method.",
    .tp_traverse = (traverseproc)direct_traverse,
    .tp_clear = (inquiry)direct_clear,
    .tp_new = direct_new,
};


/* bind(reads): the seam (xpukit/runtime/triton/seam.py, table()). reads maps each role of
 * XPUKIT_DISPATCH_READS to the attribute's name and each of XPUKIT_HIT_FIELDS to the field's
 * position in a recorded Hit; no role missing and none unknown. Again, it replaces everything. */
static PyObject *bind(PyObject *self, PyObject *reads) {
    (void)self;
#define XPUKIT_ROLE_TEXT(r) #r,
    static const char *const roles[N_DISPATCH_READS] = {XPUKIT_DISPATCH_READS(XPUKIT_ROLE_TEXT)};
    static const char *const fields[N_HIT_FIELDS] = {XPUKIT_HIT_FIELDS(XPUKIT_ROLE_TEXT)};
#undef XPUKIT_ROLE_TEXT
    if (!PyDict_Check(reads)) return PyErr_Format(PyExc_TypeError, "bind(reads: dict)");
    PyObject *names[N_DISPATCH_READS];
    Py_ssize_t pos[N_HIT_FIELDS], len = 0;
    for (int i = 0; i < N_HIT_FIELDS; i++) {
        PyObject *p = PyDict_GetItemString(reads, fields[i]); /* borrowed */
        pos[i] = p && PyLong_CheckExact(p) ? PyLong_AsSsize_t(p) : -1;
        if (pos[i] < 0) {
            PyErr_Clear();
            return PyErr_Format(PyExc_ValueError, "_xpukit_dispatch.bind: no position for the C's read %s (see xpukit/runtime/triton/seam.py)",
                                fields[i]);
        }
        if (pos[i] + 1 > len) len = pos[i] + 1;
    }
    for (int i = 0; i < N_DISPATCH_READS; i++) {
        PyObject *name = PyDict_GetItemString(reads, roles[i]); /* borrowed */
        if (!name || !PyUnicode_CheckExact(name)) {
            for (int j = 0; j < i; j++) Py_DECREF(names[j]);
            return PyErr_Format(PyExc_ValueError, "_xpukit_dispatch.bind: no attribute name for the C's read %s (see xpukit/runtime/triton/seam.py)",
                                roles[i]);
        }
        Py_INCREF(name);
        PyUnicode_InternInPlace(&name);
        names[i] = name;
    }
    PyObject *unknown = unknown_role(reads, roles, N_DISPATCH_READS, fields, N_HIT_FIELDS);
    if (unknown) {
        for (int j = 0; j < N_DISPATCH_READS; j++) Py_DECREF(names[j]);
        return PyErr_Format(PyExc_ValueError, "_xpukit_dispatch.bind: the C has no read %R (see xpukit/runtime/triton/seam.py)", unknown);
    }
    for (int i = 0; i < N_DISPATCH_READS; i++) Py_XSETREF(dispatch_names[i], names[i]);
    memcpy(hit_pos, pos, sizeof pos);
    hit_len = len;
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"bind", bind, METH_O, "bind(reads): the attribute names and Hit positions the C reads (xpukit/runtime/triton/seam.py)"},
    {"fast_key", (PyCFunction)(void (*)(void))fast_key, METH_FASTCALL,
     "fast_key(args, kwargs, modes, table) -> a specialization key, or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_xpukit_dispatch",
    "Triton's compiled launch path (see xpukit/runtime/triton/fast_table.py), on _xpukit_launcher", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__xpukit_dispatch(void) {
    ur = (const xpukit_ur_api *)PyCapsule_Import(XPUKIT_UR_API_CAPSULE, 0);
    if (!ur) return NULL;
    if (ur->version != XPUKIT_UR_API_VERSION)
        return PyErr_Format(PyExc_ImportError, "_xpukit_dispatch needs the launcher's C API %d, _xpukit_launcher has %d",
                            XPUKIT_UR_API_VERSION, ur->version);
    if (PyType_Ready(&DispatchType) < 0 || PyType_Ready(&GridCallType) < 0 || PyType_Ready(&DirectType) < 0)
        return NULL;
    if (!(int_one = PyLong_FromLong(1))) return NULL;
    for (long i = 0; i < 128; i++)
        if (!(small_ints[i] = PyLong_FromLong(i))) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&DispatchType);
    Py_INCREF(&DirectType);
    if (PyModule_AddObject(m, "Dispatch", (PyObject *)&DispatchType) < 0 ||
        PyModule_AddObject(m, "Direct", (PyObject *)&DirectType) < 0 || PyModule_AddIntConstant(m, "ABI", 3) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
