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
 * links against nothing but Python.
 */
#include "_launcher.h" /* the layouts and helpers shared with Triton's dispatch (_xpukit_dispatch) */
#include <math.h>

/* xpukit's own memory types (register_memory_types): their address is read from the instance
 * (USMAllocation._handle, None once closed; DeviceArray.alloc) without running a property. */
static PyTypeObject *usm_type, *device_array_type;
static PyObject *str_handle, *str_alloc, *str_dtype;
/* DeviceArray's __slots__ "alloc" and "dtype": their offsets in the instance (0: read as attributes) */
static Py_ssize_t alloc_offset, dtype_offset;

/* A slot of an instance of exactly the registered type: a new reference, or NULL (unset) with no error. */
static PyObject *slot_value(PyObject *o, Py_ssize_t offset) {
    PyObject *v = *(PyObject **)((char *)o + offset);
    return v ? Py_NewRef(v) : NULL;
}

/* the attribute site of the launch path (USMAllocation._handle) */
static attr_site site_usm_handle;

/* o.dtype, or NULL with no error when it has none. */
static PyObject *dtype_of(PyObject *o) {
    if (dtype_offset && device_array_type && Py_TYPE(o) == device_array_type) return slot_value(o, dtype_offset);
    PyObject *v = PyObject_GetAttr(o, str_dtype);
    if (!v) PyErr_Clear();
    return v;
}

/* 1: an address read (or not one of ours), 0: *out set, -1: closed (the callback says "freed"). */
static int own_address(PyObject *o, uint64_t *out) {
    PyObject *alloc = NULL;
    if (device_array_type && Py_TYPE(o) == device_array_type) {
        alloc = alloc_offset ? slot_value(o, alloc_offset) : PyObject_GetAttr(o, str_alloc);
        if (!alloc) {
            PyErr_Clear();
            return 1;
        }
        o = alloc;
    }
    if (!usm_type || Py_TYPE(o) != usm_type) {
        Py_XDECREF(alloc);
        return 1;
    }
    PyObject *h = inst_attr(&site_usm_handle, o, str_handle);
    Py_XDECREF(alloc);
    if (!h) {
        PyErr_Clear();
        return 1;
    }
    int rc = -1;
    if (PyLong_Check(h)) {
        unsigned long long v = PyLong_AsUnsignedLongLong(h);
        if (!(v == (unsigned long long)-1 && PyErr_Occurred())) {
            *out = v;
            rc = 0;
        }
        PyErr_Clear();
    }
    Py_DECREF(h);
    return rc;
}

/* ------------------------------------------------------------------ AllocTable */

static PyTypeObject AllocTableType;

static void table_dealloc(AllocTable *t) {
    PyMem_Free(t->starts);
    PyMem_Free(t->ends);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static PyObject *table_add(AllocTable *t, PyObject *const *args, Py_ssize_t nargs) {
    uint64_t start, size;
    if (nargs != 2) return PyErr_Format(PyExc_TypeError, "add(start, size) takes 2 arguments");
    if (read_u64(args[0], &start) || read_u64(args[1], &size)) return NULL;
    if (size == 0 || start + size < start) return PyErr_Format(PyExc_ValueError, "bad allocation range");
    if (t->n == t->cap) {
        Py_ssize_t cap = t->cap ? t->cap * 2 : 16;
        uint64_t *s = PyMem_Realloc(t->starts, cap * sizeof(uint64_t));
        if (!s) return PyErr_NoMemory();
        t->starts = s;
        uint64_t *e = PyMem_Realloc(t->ends, cap * sizeof(uint64_t));
        if (!e) return PyErr_NoMemory();
        t->ends = e;
        t->cap = cap;
    }
    Py_ssize_t lo = 0, hi = t->n;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (t->starts[mid] < start) lo = mid + 1;
        else hi = mid;
    }
    memmove(t->starts + lo + 1, t->starts + lo, (t->n - lo) * sizeof(uint64_t));
    memmove(t->ends + lo + 1, t->ends + lo, (t->n - lo) * sizeof(uint64_t));
    t->starts[lo] = start;
    t->ends[lo] = start + size;
    t->n++;
    Py_RETURN_NONE;
}

static PyObject *table_remove(AllocTable *t, PyObject *arg) {
    uint64_t start;
    if (read_u64(arg, &start)) return NULL;
    t->generation++;
    Py_ssize_t i = table_find(t, start);
    if (i < 0 || t->starts[i] != start) Py_RETURN_FALSE;
    memmove(t->starts + i, t->starts + i + 1, (t->n - i - 1) * sizeof(uint64_t));
    memmove(t->ends + i, t->ends + i + 1, (t->n - i - 1) * sizeof(uint64_t));
    t->n--;
    Py_RETURN_TRUE;
}

static PyObject *table_find_py(AllocTable *t, PyObject *arg) {
    uint64_t addr;
    if (!PyLong_Check(arg)) Py_RETURN_NONE;
    if (read_u64(arg, &addr)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    Py_ssize_t i = table_find(t, addr);
    if (i < 0) Py_RETURN_NONE;
    return Py_BuildValue("(KK)", (unsigned long long)t->starts[i], (unsigned long long)(t->ends[i] - t->starts[i]));
}

static Py_ssize_t table_len(AllocTable *t) { return t->n; }

static PyObject *table_generation(AllocTable *t, void *closure) {
    (void)closure;
    return PyLong_FromUnsignedLongLong(t->generation);
}

static PyMethodDef table_methods[] = {
    {"add", (PyCFunction)(void (*)(void))table_add, METH_FASTCALL, "add(start, size): a live allocation"},
    {"remove", (PyCFunction)table_remove, METH_O, "remove(start) -> bool: the allocation was freed"},
    {"find", (PyCFunction)table_find_py, METH_O, "find(addr) -> (start, size) | None"},
    {NULL, NULL, 0, NULL},
};
static PyGetSetDef table_getset[] = {
    {"generation", (getter)table_generation, NULL, "bumped on every removal", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
static PySequenceMethods table_as_sequence = {.sq_length = (lenfunc)table_len};

static PyTypeObject AllocTableType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_xpukit_launcher.AllocTable",
    .tp_basicsize = sizeof(AllocTable),
    .tp_dealloc = (destructor)table_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Live USM allocations of one session: sorted [start, end) ranges, bisected.",
    .tp_methods = table_methods,
    .tp_getset = table_getset,
    .tp_as_sequence = &table_as_sequence,
    .tp_new = PyType_GenericNew,
};

/* ------------------------------------------------------------------ Launcher */

static PyTypeObject LauncherType;

static void launcher_dealloc(Launcher *l) {
    Py_XDECREF(l->table);
    Py_XDECREF(l->on_arg_error);
    Py_XDECREF(l->on_ur_error);
    Py_XDECREF(l->ptr_name);
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
    Py_XSETREF(l->ptr_name, PyUnicode_InternFromString("ptr"));
    return l->ptr_name ? 0 : -1;
}

/* Report a bad argument through the Python callback (which raises); always returns NULL. */
static PyObject *arg_error(Launcher *l, Py_ssize_t index, int code, PyObject *value) {
    if (PyErr_Occurred()) PyErr_Clear();
    PyObject *r = PyObject_CallFunction(l->on_arg_error, "niO", index, code, value ? value : Py_None);
    Py_XDECREF(r);
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "xpukit: bad kernel argument");
    return NULL;
}

static PyObject *ur_error(Launcher *l, int32_t code, const char *fn) {
    PyObject *r = PyObject_CallFunction(l->on_ur_error, "is", (int)code, fn);
    Py_XDECREF(r);
    if (!PyErr_Occurred()) PyErr_Format(PyExc_RuntimeError, "%s failed: %d", fn, (int)code);
    return NULL;
}

/* A device address from an int or an object with an int .ptr. 0 ok, else an ARG_* code. */
static int get_address(Launcher *l, PyObject *o, uint64_t *out) {
    if (o == Py_None) return ARG_NULL;
    if (PyLong_Check(o) && !PyBool_Check(o)) {
        if (read_u64(o, out)) return ARG_RANGE;
        return 0;
    }
    int own = own_address(o, out);
    if (own <= 0) return own == 0 ? 0 : ARG_TYPE;
    PyObject *p = PyObject_GetAttr(o, l->ptr_name);
    if (!p) {
        /* no .ptr (or a closed allocation's, which raises: the callback tells which) */
        int closed = !PyErr_ExceptionMatches(PyExc_AttributeError);
        PyErr_Clear();
        if (closed || PyFloat_Check(o) || PyBool_Check(o)) return ARG_TYPE;
        PyObject *idx = PyNumber_Index(o); /* numpy integers */
        if (!idx) return ARG_TYPE;
        int rc = read_u64(idx, out) ? ARG_RANGE : 0;
        Py_DECREF(idx);
        return rc;
    }
    int rc = 0;
    if (!PyLong_Check(p) || read_u64(p, out)) rc = ARG_TYPE;
    Py_DECREF(p);
    return rc;
}

static int check_live(Launcher *l, uint64_t addr) {
    if (addr == 0) return ARG_NULL;
    return table_find(l->table, addr) < 0 ? ARG_NOT_LIVE : 0;
}

static int get_signed(PyObject *o, long long lo, long long hi, uint64_t *out) {
    PyObject *idx = PyNumber_Index(o);
    if (!idx) return ARG_TYPE;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(idx, &overflow);
    Py_DECREF(idx);
    if (overflow || (v == -1 && PyErr_Occurred()) || v < lo || v > hi) return ARG_RANGE;
    *out = (uint64_t)v;
    return 0;
}

static int get_unsigned(PyObject *o, unsigned long long hi, uint64_t *out) {
    PyObject *idx = PyNumber_Index(o);
    if (!idx) return ARG_TYPE;
    int overflow = 0;
    long long as_signed = PyLong_AsLongLongAndOverflow(idx, &overflow);
    if (overflow < 0 || (overflow == 0 && as_signed < 0)) { /* negative */
        Py_DECREF(idx);
        return ARG_RANGE;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(idx);
    Py_DECREF(idx);
    if ((v == (unsigned long long)-1 && PyErr_Occurred()) || v > hi) return ARG_RANGE;
    *out = v;
    return 0;
}

static int get_double(PyObject *o, double *out) {
    if (PyFloat_CheckExact(o)) {
        *out = PyFloat_AS_DOUBLE(o);
        return 0;
    }
    if (PyUnicode_Check(o) || PyBytes_Check(o) || o == Py_None) return ARG_TYPE;
    double v = PyFloat_AsDouble(o);
    if (v == -1.0 && PyErr_Occurred()) return ARG_TYPE;
    *out = v;
    return 0;
}

static uint16_t to_bf16(float f) {
    uint32_t bits;
    memcpy(&bits, &f, 4);
    if (isnan(f)) return (uint16_t)((bits >> 16) | 0x0040); /* stay a NaN (quiet) */
    bits += 0x7FFF + ((bits >> 16) & 1);                     /* round to nearest even */
    return (uint16_t)(bits >> 16);
}

/* Convert one argument by kind into *bits (little-endian payload) and *size. 0 or an ARG_* code. */
static int convert(Launcher *l, char kind, PyObject *o, uint64_t *bits, size_t *size) {
    int rc;
    double d;
    *bits = 0;
    switch (kind) {
    case 'P': /* typed pointer */
    case 'A': /* an integer parameter the kernel turns into a pointer */
        *size = 8;
        if ((rc = get_address(l, o, bits))) return rc;
        return check_live(l, *bits);
    case 'q':
    case 'Q':
        *size = 8;
        if (!PyLong_Check(o) && !PyFloat_Check(o) &&
            (Py_TYPE(o) == usm_type || Py_TYPE(o) == device_array_type || PyObject_HasAttr(o, l->ptr_name))) {
            /* an allocation handed to a 64-bit integer: an address, so checked like one */
            if ((rc = get_address(l, o, bits))) return rc;
            return check_live(l, *bits);
        }
        return kind == 'q' ? get_signed(o, INT64_MIN, INT64_MAX, bits) : get_unsigned(o, UINT64_MAX, bits);
    case 'i': *size = 4; return get_signed(o, INT32_MIN, INT32_MAX, bits);
    case 'I': *size = 4; return get_unsigned(o, UINT32_MAX, bits);
    case 'h': *size = 2; return get_signed(o, INT16_MIN, INT16_MAX, bits);
    case 'H': *size = 2; return get_unsigned(o, UINT16_MAX, bits);
    case 'b': *size = 1; return get_signed(o, INT8_MIN, INT8_MAX, bits);
    case 'B': *size = 1; return get_unsigned(o, UINT8_MAX, bits);
    case '?': *size = 1; return get_unsigned(o, 1, bits);
    case 'f': {
        *size = 4;
        if ((rc = get_double(o, &d))) return rc;
        float f = (float)d;
        uint32_t u;
        memcpy(&u, &f, 4);
        *bits = u;
        return 0;
    }
    case 'd':
        *size = 8;
        if ((rc = get_double(o, &d))) return rc;
        memcpy(bits, &d, 8);
        return 0;
    case 'e': {
        *size = 2;
        if ((rc = get_double(o, &d))) return rc;
        unsigned char buf[2];
        if (PyFloat_Pack2(d, (char *)buf, 1) < 0) return ARG_RANGE;
        *bits = (uint64_t)buf[0] | ((uint64_t)buf[1] << 8);
        return 0;
    }
    case 'E':
        *size = 2;
        if ((rc = get_double(o, &d))) return rc;
        *bits = to_bf16((float)d);
        return 0;
    }
    return ARG_TYPE;
}


/* convert() from what was already read, for the cases where that gives convert()'s result without
 * running anything; -1: not covered (the caller runs convert()). */
static int convert_pre(Launcher *l, char kind, const pre_t *p, uint64_t *bits, size_t *size) {
    long long v = (long long)p->v;
    switch (p->tag) {
    case PRE_OWN: /* own_address() == 0: what get_address() reads for 'P', 'A' and memory passed to 'q'/'Q' */
        if (kind != 'P' && kind != 'A' && kind != 'q' && kind != 'Q') return -1;
        *size = 8;
        *bits = p->v;
        return check_live(l, *bits);
    case PRE_INT: {
        long long lo, hi;
        switch (kind) {
        case 'P':
        case 'A':
            if (v < 0) return -1; /* convert() names it */
            *size = 8;
            *bits = p->v;
            return check_live(l, *bits);
        case 'q': *size = 8; *bits = p->v; return 0;
        case 'Q': *size = 8; lo = 0; hi = INT64_MAX; break;
        case 'i': *size = 4; lo = INT32_MIN; hi = INT32_MAX; break;
        case 'I': *size = 4; lo = 0; hi = UINT32_MAX; break;
        case 'h': *size = 2; lo = INT16_MIN; hi = INT16_MAX; break;
        case 'H': *size = 2; lo = 0; hi = UINT16_MAX; break;
        case 'b': *size = 1; lo = INT8_MIN; hi = INT8_MAX; break;
        case 'B': *size = 1; lo = 0; hi = UINT8_MAX; break;
        case '?': *size = 1; lo = 0; hi = 1; break;
        default: return -1; /* an int for a float parameter: convert() */
        }
        if (v < lo || v > hi) return ARG_RANGE;
        *bits = (uint64_t)v;
        return 0;
    }
    case PRE_FLOAT: {
        double d;
        memcpy(&d, &p->v, 8);
        if (kind == 'f') {
            float f = (float)d;
            uint32_t u;
            memcpy(&u, &f, 4);
            *size = 4;
            *bits = u;
            return 0;
        }
        if (kind == 'd') {
            *size = 8;
            *bits = p->v;
            return 0;
        }
        return -1;
    }
    }
    return -1;
}

static int get_grid(PyObject *o, size_t *out) {
    if (PyLong_CheckExact(o)) {
        long long v = PyLong_AsLongLong(o);
        if ((v == -1 && PyErr_Occurred()) || v < 0 || v > 0x7FFFFFFF) return -1;
        *out = (size_t)v;
        return 0;
    }
    PyObject *idx = PyNumber_Index(o);
    if (!idx) return -1;
    long long v = PyLong_AsLongLong(idx);
    Py_DECREF(idx);
    if ((v == -1 && PyErr_Occurred()) || v < 0 || v > 0x7FFFFFFF) return -1;
    *out = (size_t)v;
    return 0;
}

/* The launch after the caller has checked that the kernel is open and read its queue handle and
 * grid: the count, every argument converted and checked (nothing touched on a bad one), then the release's enqueue.
 * items: n borrowed arguments, kept alive by the caller; pre: what the caller read from each (or
 * NULL); checked_generation: the table's generation before anything was read from the arguments
 * (the caller's reads count: a free since then re-checks every address). */
static PyObject *launch_core(Launcher *l, void *queue, const size_t *g, PyObject *const *items, Py_ssize_t n,
                             int want_event, const pre_t *pre, uint64_t checked_generation) {
    if (n != l->nparams) return arg_error(l, n, ARG_COUNT, Py_None);
    /* 1: convert and check everything; nothing is touched on a bad argument */
    uint64_t vals[MAX_PARAMS];
    size_t sizes[MAX_PARAMS];
    for (Py_ssize_t i = 0; i < n; i++) {
        int rc = pre && pre[i].tag ? convert_pre(l, l->kinds[i], &pre[i], &vals[i], &sizes[i]) : -1;
        if (rc) /* not covered, or bad: convert() gives the code the launch has always given */
            rc = convert(l, l->kinds[i], items[i], &vals[i], &sizes[i]);
        if (rc) {
            PyObject *bad = items[i];
            Py_INCREF(bad);
            PyObject *r = arg_error(l, i, rc, bad);
            Py_DECREF(bad);
            return r;
        }
    }
    if (l->table->generation != checked_generation) {
        /* Python code run by a conversion (a .ptr property) or by the caller let another thread
         * free memory: check every address again, now that nothing else can run until the enqueue. */
        for (Py_ssize_t i = 0; i < n; i++) {
            char k = l->kinds[i];
            int is_address = k == 'P' || k == 'A' ||
                             ((k == 'q' || k == 'Q') && !PyLong_Check(items[i]) && !PyFloat_Check(items[i]));
            if (is_address && check_live(l, vals[i])) {
                PyObject *bad = items[i];
                Py_INCREF(bad);
                PyObject *r = arg_error(l, i, ARG_NOT_LIVE, bad);
                Py_DECREF(bad);
                return r;
            }
        }
    }
    if (g[0] == 0 || g[1] == 0 || g[2] == 0) Py_RETURN_NONE; /* an empty grid launches nothing */
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
    {"forget", (PyCFunction)launcher_forget, METH_NOARGS, "set every argument again at the next launch"},
    {"hidden", (PyCFunction)launcher_hidden, METH_O,
     "hidden(((kind, value), ...)): arguments after the user's: ('P', address) or ('L', local bytes)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject LauncherType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_xpukit_launcher.Launcher",
    .tp_basicsize = sizeof(Launcher),
    .tp_dealloc = (destructor)launcher_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
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

static PyObject *register_memory_types(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *usm, *arr;
    if (!PyArg_ParseTuple(args, "O!O!", &PyType_Type, &usm, &PyType_Type, &arr)) return NULL;
    Py_INCREF(usm);
    Py_INCREF(arr);
    Py_XSETREF(usm_type, (PyTypeObject *)usm);
    Py_XSETREF(device_array_type, (PyTypeObject *)arr);
    alloc_offset = member_offset((PyTypeObject *)arr, str_alloc);
    dtype_offset = member_offset((PyTypeObject *)arr, str_dtype);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"register_memory_types", register_memory_types, METH_VARARGS,
     "register_memory_types(USMAllocation, DeviceArray): read their addresses without properties"},
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
};

PyMODINIT_FUNC PyInit__xpukit_launcher(void) {
    if (PyType_Ready(&AllocTableType) < 0 || PyType_Ready(&LauncherType) < 0) return NULL;
    str_handle = PyUnicode_InternFromString("_handle");
    str_alloc = PyUnicode_InternFromString("alloc");
    str_dtype = PyUnicode_InternFromString("dtype");
    if (!str_handle || !str_alloc || !str_dtype) return NULL;
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
        PyModule_AddObject(m, "Launcher", (PyObject *)&LauncherType) < 0 || PyModule_AddIntConstant(m, "ABI", 4) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
