/* _xpukit_launcher: the per-launch path of xpukit's UR core layer, compiled.
 *
 * One Launcher per loaded kernel knows its argument kinds (a string, one letter per parameter) and
 * the release's launch form. launch() converts and checks every argument, then either
 *   - (2025.x) sets only the ones that changed since the last launch (urKernelSetArg*) and calls
 *     urEnqueueKernelLaunch (9 or 11 parameters), or
 *   - (2026.0+) fills a persistent ur_exp_kernel_arg_properties_t array and makes one
 *     urEnqueueKernelLaunchWithArgsExp call,
 * all under the GIL, so argument setting and enqueueing never interleave between Python threads.
 * Hidden arguments after the user's (Triton's scratch pointers, its local-memory buffer) are set
 * with hidden() and travel with every launch. Pointer arguments must lie inside a live
 * allocation of the session's AllocTable; anything else is reported through the Python callback
 * `on_arg_error(index, code, value)`, which raises the kit's KernelArgumentError. UR failures go
 * through `on_ur_error(code, function_name)`. Nothing is set or enqueued when a check fails.
 *
 * The Python twin (xpukit/runtime/ur/launcher.py) implements the same interface and semantics;
 * the tests run both. Function pointers come from the loaded UR loader (ctypes), so this module
 * links against nothing but Python. What it reads from Python objects is named by
 * xpukit/runtime/ur/seam.py and handed over by bind() (below), once, when xpukit's core imports.
 * Parts: this file (the module, bind(), the Launcher and its launch), _launcher_args.c (the
 * arguments converted and checked, what every launch does first), _launcher_table.c (the
 * AllocTable). Every address it accepts lies in the session's AllocTable.
 */
#include "_launcher_internal.h" /* the parts' shared declarations; _launcher.h: what the dispatch shares */

/* ------------------------------------------------------------------ Launcher */

static int launcher_traverse(Launcher *l, visitproc visit, void *arg) {
    Py_VISIT(l->table);
    Py_VISIT(l->on_arg_error);
    Py_VISIT(l->on_ur_error);
    Py_VISIT(l->on_grow);
    return 0;
}

/* what a Launcher holds of Python's (a grow callback is a bound method of the kernel holding it: a cycle) */
static int launcher_clear(Launcher *l) {
    Py_CLEAR(l->on_arg_error);
    Py_CLEAR(l->on_ur_error);
    Py_CLEAR(l->on_grow);
    return 0;
}

static void launcher_dealloc(Launcher *l) {
    PyObject_GC_UnTrack(l);
    launcher_clear(l);
    Py_CLEAR(l->table);
    Py_TYPE(l)->tp_free((PyObject *)l);
}

/* Launcher(kernel, form, (set_value, set_pointer, set_local, launch), kinds, local, table, on_arg_error,
 * on_ur_error). The setters are 0 for FORM_WITH_ARGS, where launch is urEnqueueKernelLaunchWithArgsExp. */
static int launcher_init(Launcher *l, PyObject *args, PyObject *kw) {
    PyObject *kernel, *sv, *sp, *sl, *la, *table, *on_arg, *on_ur;
    int form;
    const char *kinds;
    Py_ssize_t nk;
    unsigned long long lx, ly, lz;
    (void)kw;
    if (!launcher_names[0]) {
        PyErr_SetString(PyExc_RuntimeError, "_xpukit_launcher.bind() has not been called (xpukit.runtime.ur.core calls it)");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "Oi(OOOO)s#(KKK)O!OO", &kernel, &form, &sv, &sp, &sl, &la, &kinds, &nk, &lx, &ly,
                          &lz, &AllocTableType, &table, &on_arg, &on_ur))
        return -1;
    if (nk > MAX_PARAMS) {
        PyErr_Format(PyExc_ValueError, "at most %d kernel parameters", MAX_PARAMS);
        return -1;
    }
    if (form < FORM_SET_ARGS_LAUNCH9 || form > FORM_WITH_ARGS) {
        PyErr_Format(PyExc_ValueError, "unknown launch form %d", form);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nk; i++) {
        if (!strchr("PAqQiIhHbB?fdeE", kinds[i])) {
            PyErr_Format(PyExc_ValueError, "unknown argument kind %c", kinds[i]);
            return -1;
        }
    }
    l->kernel = fnptr(kernel);
    l->set_value = (set_value_fn)fnptr(sv);
    l->set_pointer = (set_pointer_fn)fnptr(sp);
    l->set_local = (set_local_fn)fnptr(sl);
    l->launch = fnptr(la);
    if (PyErr_Occurred()) return -1;
    if (!l->kernel || !l->launch ||
        (form != FORM_WITH_ARGS && (!l->set_value || !l->set_pointer || !l->set_local))) {
        PyErr_SetString(PyExc_ValueError, "null kernel handle or UR function pointer");
        return -1;
    }
    l->form = form;
    l->nparams = nk;
    memcpy(l->kinds, kinds, nk);
    memset(l->valid, 0, sizeof l->valid);
    l->nhidden = 0;
    l->hidden_dirty = 0;
    memset(l->args, 0, sizeof l->args);
    for (Py_ssize_t i = 0; i < nk; i++) {
        kernel_arg_t *a = &l->args[i];
        a->stype = STYPE_KERNEL_ARG;
        a->index = (uint32_t)i;
        if (kinds[i] == 'P') {
            a->type = KARG_POINTER;
            a->size = sizeof(void *);
        } else {
            a->type = KARG_VALUE; /* 'A', 'q' & co: the value's bytes (little-endian in store[i]) */
            a->value.value = &l->store[i];
        }
    }
    l->local[0] = lx;
    l->local[1] = ly;
    l->local[2] = lz;
    Py_INCREF(table);
    Py_XSETREF(l->table, (AllocTable *)table);
    l->seen_generation = l->table->generation;
    Py_INCREF(on_arg);
    Py_XSETREF(l->on_arg_error, on_arg);
    Py_INCREF(on_ur);
    Py_XSETREF(l->on_ur_error, on_ur);
    return 0;
}

static PyObject *ur_error(Launcher *l, int32_t code, const char *fn) {
    if (!l->on_ur_error) return PyErr_Format(PyExc_RuntimeError, "%s failed: %d", fn, (int)code);
    PyObject *r = PyObject_CallFunction(l->on_ur_error, "is", (int)code, fn);
    Py_XDECREF(r);
    if (!PyErr_Occurred()) PyErr_Format(PyExc_RuntimeError, "%s failed: %d", fn, (int)code);
    return NULL;
}

/* launch_prepare's checks, then the release's enqueue on queue. */
static PyObject *launch_core(Launcher *l, void *queue, const size_t *g, PyObject *const *items, Py_ssize_t n,
                             int want_event, const pre_t *pre, uint64_t checked_generation) {
    uint64_t vals[MAX_PARAMS];
    size_t sizes[MAX_PARAMS];
    int rc = launch_prepare(l, g, items, n, pre, checked_generation, vals, sizes);
    if (rc < 0) return NULL;
    if (rc) Py_RETURN_NONE;
    size_t global[3] = {g[0] * l->local[0], g[1] * l->local[1], g[2] * l->local[2]};
    void *event = NULL;
    void **pev = want_event ? &event : NULL;
    int32_t code;
    if (l->form == FORM_WITH_ARGS) {
        /* 2: the values into the persistent array, 3: one call carries them all */
        for (Py_ssize_t i = 0; i < n; i++) {
            if (l->kinds[i] == 'P') {
                l->args[i].value.pointer = (const void *)(uintptr_t)vals[i];
            } else {
                l->store[i] = vals[i];
                l->args[i].size = sizes[i];
            }
        }
        code = ((launch_args_fn)l->launch)(queue, l->kernel, 3, NULL, global, l->local, (uint32_t)(n + l->nhidden),
                                           l->args, NULL, 0, NULL, pev);
        if (code) return ur_error(l, code, "urEnqueueKernelLaunchWithArgsExp");
        if (want_event) return PyLong_FromVoidPtr(event);
        Py_RETURN_NONE;
    }
    /* 2: set what changed. A USM free anywhere in the session re-binds every argument: Intel's
     * CPU runtime ties a pointer argument to its allocation when it is set. */
    if (l->seen_generation != l->table->generation) {
        memset(l->valid, 0, sizeof l->valid);
        l->seen_generation = l->table->generation;
        l->hidden_dirty = 1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (l->valid[i] && l->last[i] == vals[i]) continue;
        if (l->kinds[i] == 'P') {
            code = l->set_pointer(l->kernel, (uint32_t)i, NULL, (const void *)(uintptr_t)vals[i]);
        } else {
            code = l->set_value(l->kernel, (uint32_t)i, sizes[i], NULL, &vals[i]);
        }
        if (code) {
            l->valid[i] = 0;
            return ur_error(l, code, l->kinds[i] == 'P' ? "urKernelSetArgPointer" : "urKernelSetArgValue");
        }
        l->last[i] = vals[i];
        l->valid[i] = 1;
    }
    if (l->hidden_dirty) {
        for (Py_ssize_t j = 0; j < l->nhidden; j++) {
            uint32_t index = (uint32_t)(n + j);
            if (l->hidden_kinds[j] == 'P')
                code = l->set_pointer(l->kernel, index, NULL, (const void *)(uintptr_t)l->hidden_values[j]);
            else
                code = l->set_local(l->kernel, index, (size_t)l->hidden_values[j], NULL);
            if (code) return ur_error(l, code, l->hidden_kinds[j] == 'P' ? "urKernelSetArgPointer" : "urKernelSetArgLocal");
        }
        l->hidden_dirty = 0;
    }
    /* 3: enqueue */
    if (l->form == FORM_SET_ARGS_LAUNCH11)
        code = ((launch11_fn)l->launch)(queue, l->kernel, 3, NULL, global, l->local, 0, NULL, 0, NULL, pev);
    else
        code = ((launch9_fn)l->launch)(queue, l->kernel, 3, NULL, global, l->local, 0, NULL, pev);
    if (code) return ur_error(l, code, "urEnqueueKernelLaunch");
    if (want_event) return PyLong_FromVoidPtr(event);
    Py_RETURN_NONE;
}

/* launch(queue, gx, gy, gz, args, want_event=False) -> event handle (int) | None */
static PyObject *launcher_launch(Launcher *l, PyObject *const *a, Py_ssize_t nargs) {
    if (nargs != 5 && nargs != 6) return PyErr_Format(PyExc_TypeError, "launch(queue, gx, gy, gz, args[, want_event])");
    if (!l->kernel) return arg_error(l, -1, ARG_CLOSED, Py_None);
    void *queue = fnptr(a[0]);
    if (!queue) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "null queue handle");
        return NULL;
    }
    size_t g[3];
    for (int i = 0; i < 3; i++)
        if (get_grid(a[1 + i], &g[i])) return arg_error(l, -1, ARG_GRID, a[1 + i]);
    PyObject *args = a[4];
    if (!PyTuple_Check(args) && !PyList_Check(args)) return PyErr_Format(PyExc_TypeError, "args must be a tuple");
    /* A tuple (a list is copied): conversions may run Python code, which must not move the items. */
    PyObject *seq = PySequence_Tuple(args);
    if (!seq) return NULL;
    int want_event = nargs == 6 && PyObject_IsTrue(a[5]);
    PyObject *r = launch_core(l, queue, g, &PyTuple_GET_ITEM(seq, 0), PyTuple_GET_SIZE(seq), want_event, NULL,
                              l->table->generation);
    Py_DECREF(seq);
    return r;
}

/* hidden(((kind, value), ...)): the arguments after the user's, 'P' (a device address, 0 = null)
 * or 'L' (local memory bytes); set at the next launch (2025.x) or carried by every launch (2026.0+). */
static PyObject *launcher_hidden(Launcher *l, PyObject *entries) {
    PyObject *seq = PySequence_Tuple(entries);
    if (!seq) return NULL;
    Py_ssize_t m = PyTuple_GET_SIZE(seq);
    if (m > MAX_HIDDEN || l->nparams + m > MAX_PARAMS + MAX_HIDDEN) {
        Py_DECREF(seq);
        return PyErr_Format(PyExc_ValueError, "at most %d hidden arguments", MAX_HIDDEN);
    }
    char kinds[MAX_HIDDEN];
    uint64_t values[MAX_HIDDEN];
    for (Py_ssize_t j = 0; j < m; j++) {
        const char *k;
        unsigned long long v;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(seq, j), "sK", &k, &v) || (strcmp(k, "P") && strcmp(k, "L"))) {
            Py_DECREF(seq);
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "hidden arguments are ('P', address) or ('L', bytes)");
            return NULL;
        }
        kinds[j] = k[0];
        values[j] = v;
    }
    Py_DECREF(seq);
    for (Py_ssize_t j = 0; j < m; j++) {
        kernel_arg_t *a = &l->args[l->nparams + j];
        memset(a, 0, sizeof *a);
        a->stype = STYPE_KERNEL_ARG;
        a->index = (uint32_t)(l->nparams + j);
        if (kinds[j] == 'P') {
            a->type = KARG_POINTER;
            a->size = sizeof(void *);
            a->value.pointer = (const void *)(uintptr_t)values[j];
        } else {
            a->type = KARG_LOCAL;
            a->size = (size_t)values[j];
        }
        l->hidden_kinds[j] = kinds[j];
        l->hidden_values[j] = values[j];
    }
    l->nhidden = m;
    l->hidden_dirty = 1;
    Py_RETURN_NONE;
}

/* grow_with(callback): callback(programs) before a launch of more programs than any before it. */
static PyObject *launcher_grow_with(Launcher *l, PyObject *callback) {
    if (!PyCallable_Check(callback)) return PyErr_Format(PyExc_TypeError, "grow_with(callback): a callable");
    Py_INCREF(callback);
    Py_XSETREF(l->on_grow, callback);
    l->grown = 0;
    Py_RETURN_NONE;
}

static PyObject *launcher_close(Launcher *l, PyObject *unused) {
    (void)unused;
    l->kernel = NULL;
    Py_RETURN_NONE;
}

static PyObject *launcher_forget(Launcher *l, PyObject *unused) {
    (void)unused;
    memset(l->valid, 0, sizeof l->valid);
    l->hidden_dirty = 1;
    Py_RETURN_NONE;
}

static PyMethodDef launcher_methods[] = {
    {"launch", (PyCFunction)(void (*)(void))launcher_launch, METH_FASTCALL,
     "launch(queue, gx, gy, gz, args[, want_event]): check, set changed arguments, enqueue"},
    {"close", (PyCFunction)launcher_close, METH_NOARGS, "the kernel was released: refuse further launches"},
    {"grow_with", (PyCFunction)launcher_grow_with, METH_O,
     "grow_with(callback): callback(programs) before a launch of more programs than any before (Triton's scratch)"},
    {"forget", (PyCFunction)launcher_forget, METH_NOARGS, "set every argument again at the next launch"},
    {"hidden", (PyCFunction)launcher_hidden, METH_O,
     "hidden(((kind, value), ...)): arguments after the user's: ('P', address) or ('L', local bytes)"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject LauncherType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_xpukit_launcher.Launcher",
    .tp_basicsize = sizeof(Launcher),
    .tp_dealloc = (destructor)launcher_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)launcher_traverse,
    .tp_clear = (inquiry)launcher_clear,
    .tp_doc = "One kernel's launch path: checked arguments, changed ones set, one enqueue.",
    .tp_methods = launcher_methods,
    .tp_init = (initproc)launcher_init,
    .tp_new = PyType_GenericNew,
};

/* The offset of a __slots__ member holding an object (what PyObject_GetAttr would read), or 0. */
static Py_ssize_t member_offset(PyTypeObject *t, PyObject *name) {
    PyObject *descr = _PyType_Lookup(t, name); /* borrowed */
    if (!descr || Py_TYPE(descr) != &PyMemberDescr_Type) return 0;
    PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
    return (m->type == T_OBJECT_EX && !(m->flags & READ_RESTRICTED)) ? m->offset : 0;
}

/* bind(reads, allocation_type, array_type): the seam (xpukit/runtime/ur/seam.py). reads maps each
 * role of XPUKIT_LAUNCHER_READS to the attribute's name, no role missing and none unknown; the two
 * types are the kit's own memory (USMAllocation, DeviceArray), whose addresses are read from the
 * instance. Called once, when xpukit.runtime.ur.core imports; again, it replaces everything. */
static PyObject *bind(PyObject *self, PyObject *args) {
    (void)self;
    static const char *const roles[N_LAUNCHER_READS] = {
#define XPUKIT_ROLE_TEXT(r) #r,
        XPUKIT_LAUNCHER_READS(XPUKIT_ROLE_TEXT)
#undef XPUKIT_ROLE_TEXT
    };
    PyObject *reads, *usm, *arr;
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyDict_Type, &reads, &PyType_Type, &usm, &PyType_Type, &arr))
        return NULL;
    PyObject *names[N_LAUNCHER_READS];
    for (int i = 0; i < N_LAUNCHER_READS; i++) {
        PyObject *name = PyDict_GetItemString(reads, roles[i]); /* borrowed */
        if (!name || !PyUnicode_CheckExact(name)) {
            for (int j = 0; j < i; j++) Py_DECREF(names[j]);
            return PyErr_Format(PyExc_ValueError, "_xpukit_launcher.bind: no attribute name for the C's read %s (see xpukit/runtime/ur/seam.py)",
                                roles[i]);
        }
        Py_INCREF(name);
        PyUnicode_InternInPlace(&name);
        names[i] = name;
    }
    PyObject *unknown = unknown_role(reads, roles, N_LAUNCHER_READS, NULL, 0);
    if (unknown) {
        for (int j = 0; j < N_LAUNCHER_READS; j++) Py_DECREF(names[j]);
        return PyErr_Format(PyExc_ValueError, "_xpukit_launcher.bind: the C has no read %R (see xpukit/runtime/ur/seam.py)", unknown);
    }
    for (int i = 0; i < N_LAUNCHER_READS; i++) Py_XSETREF(launcher_names[i], names[i]);
    Py_INCREF(usm);
    Py_INCREF(arr);
    Py_XSETREF(usm_type, (PyTypeObject *)usm);
    Py_XSETREF(device_array_type, (PyTypeObject *)arr);
    alloc_offset = member_offset((PyTypeObject *)arr, launcher_names[READ_ARRAY_ALLOC]);
    dtype_offset = member_offset((PyTypeObject *)arr, launcher_names[READ_ARRAY_DTYPE]);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"bind", bind, METH_VARARGS,
     "bind(reads, USMAllocation, DeviceArray): the attribute names the C reads (xpukit/runtime/ur/seam.py), "
     "and the memory types read from the instance"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_xpukit_launcher", "xpukit's compiled launch path (see xpukit/runtime/ur/launcher.py)",
    -1, module_methods, NULL, NULL, NULL, NULL,
};

/* What the C built on this module (Triton's dispatch) calls; handed out as the capsule _C_API. */
static xpukit_ur_api ur_api = {
    .version = XPUKIT_UR_API_VERSION,
    .alloc_table_type = &AllocTableType,
    .launcher_type = &LauncherType,
    .launcher_launch = (PyCFunction)(void (*)(void))launcher_launch,
    .launch_core = launch_core,
    .arg_error = arg_error,
    .get_grid = get_grid,
    .own_address = own_address,
    .dtype_of = dtype_of,
    .lookup_address = lookup_address,
};

PyMODINIT_FUNC PyInit__xpukit_launcher(void) {
    if (PyType_Ready(&AllocTableType) < 0 || PyType_Ready(&LauncherType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&AllocTableType);
    Py_INCREF(&LauncherType);
    PyObject *api = PyCapsule_New(&ur_api, XPUKIT_UR_API_CAPSULE, NULL);
    if (!api || PyModule_AddObject(m, "_C_API", api) < 0) {
        Py_XDECREF(api);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddObject(m, "AllocTable", (PyObject *)&AllocTableType) < 0 ||
        PyModule_AddObject(m, "Launcher", (PyObject *)&LauncherType) < 0 || PyModule_AddIntConstant(m, "ABI", 6) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
