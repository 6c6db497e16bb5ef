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
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ur_result_t is a 32-bit enum; handles are pointers. Prototypes as in each release's ur_api.h
 * (mirrored in xpukit/runtime/ur/_api.py). */
typedef int32_t (*set_value_fn)(void *, uint32_t, size_t, const void *, const void *);
typedef int32_t (*set_pointer_fn)(void *, uint32_t, const void *, const void *);
typedef int32_t (*set_local_fn)(void *, uint32_t, size_t, const void *);
/* 2025.3: (..., uint32_t numPropsInLaunchPropList, const ur_kernel_launch_property_t *, ...) */
typedef int32_t (*launch11_fn)(void *, void *, uint32_t, const size_t *, const size_t *, const size_t *, uint32_t,
                               const void *, uint32_t, void *const *, void **);
/* 2025.0-2025.2 */
typedef int32_t (*launch9_fn)(void *, void *, uint32_t, const size_t *, const size_t *, const size_t *, uint32_t,
                              void *const *, void **);
/* 2026.0+: urEnqueueKernelLaunchWithArgsExp(..., numArgs, pArgs, launchPropList, ...) */
typedef int32_t (*launch_args_fn)(void *, void *, uint32_t, const size_t *, const size_t *, const size_t *, uint32_t,
                                  const void *, const void *, uint32_t, void *const *, void **);

/* ur_exp_kernel_arg_properties_t (2026.0+). */
typedef struct {
    uint32_t stype; /* UR_STRUCTURE_TYPE_EXP_KERNEL_ARG_PROPERTIES */
    void *pNext;
    uint32_t type; /* ur_exp_kernel_arg_type_t */
    uint32_t index;
    size_t size;
    union {
        const void *value;   /* VALUE: the bytes, copied at the call */
        const void *pointer; /* POINTER: the USM address itself */
        struct {
            void *hMem;
            uint32_t flags;
        } mem;
        void *sampler;
    } value;
} kernel_arg_t;
_Static_assert(sizeof(kernel_arg_t) == 48, "ur_exp_kernel_arg_properties_t is 48 bytes");
enum { STYPE_KERNEL_ARG = 0x5000, KARG_VALUE = 0, KARG_POINTER = 1, KARG_LOCAL = 3 };
/* Launch forms (xpukit.runtime.ur._api.LaunchForm). */
enum { FORM_SET_ARGS_LAUNCH9 = 0, FORM_SET_ARGS_LAUNCH11 = 1, FORM_WITH_ARGS = 2 };

/* Error codes handed to on_arg_error (mirrored in launcher.py). */
enum { ARG_TYPE = 1, ARG_RANGE = 2, ARG_NULL = 3, ARG_NOT_LIVE = 4, ARG_COUNT = 5, ARG_GRID = 6, ARG_CLOSED = 7 };

#define MAX_PARAMS 256
#define MAX_HIDDEN 8

/* xpukit's own memory types (register_memory_types): their address is read from the instance
 * (USMAllocation._handle, None once closed; DeviceArray.alloc) without running a property. */
static PyTypeObject *usm_type, *device_array_type;
static PyObject *str_handle, *str_alloc, *str_ptr, *str_dtype;
/* DeviceArray's __slots__ "alloc" and "dtype": their offsets in the instance (0: read as attributes) */
static Py_ssize_t alloc_offset, dtype_offset;

/* A slot of an instance of exactly the registered type: a new reference, or NULL (unset) with no error. */
static PyObject *slot_value(PyObject *o, Py_ssize_t offset) {
    PyObject *v = *(PyObject **)((char *)o + offset);
    return v ? Py_NewRef(v) : NULL;
}

/* How o.name is read for objects of one type (an attribute site's cache): what the generic lookup
 * would do, decided from the type alone and valid while the type's version tag is unchanged (CPython
 * clears the tag on every change to the type or its bases: a new attribute, a new __getattribute__,
 * a changed MRO). Only the GIL holder reads or fills a site, and filling runs no Python code. */
typedef struct {
    PyTypeObject *type; /* NULL: empty */
    unsigned int tag;
    Py_ssize_t how; /* -1: the instance dict, > 0: a __slots__ member's offset, 0: PyObject_GetAttr */
} attr_site;

static Py_ssize_t attr_how(PyTypeObject *t, PyObject *name) {
    if (t->tp_getattro != PyObject_GenericGetAttr) return 0; /* __getattr__/__getattribute__ */
    PyObject *descr = _PyType_Lookup(t, name);             /* borrowed */
    if (!descr) return -1; /* nothing of that name on the MRO: the generic lookup reads the dict */
    if (Py_TYPE(descr) == &PyMemberDescr_Type && PyType_IsSubtype(t, PyDescr_TYPE(descr))) {
        PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
        if (m->type == T_OBJECT_EX && !(m->flags & READ_RESTRICTED) && m->offset > 0) return m->offset;
    }
    return 0; /* a property, a class default, another descriptor */
}

/* o.name exactly as PyObject_GetAttr reads it (a new reference, or NULL with its error), without
 * the generic lookup's calls where it reads the instance itself: the instance dict when no class on
 * the MRO has that name, a __slots__ member's slot (a data descriptor, so the generic lookup returns
 * it; an unset slot takes the full lookup, which raises); anything else: PyObject_GetAttr. */
static PyObject *inst_attr(attr_site *site, PyObject *o, PyObject *name) {
    PyTypeObject *t = Py_TYPE(o);
    Py_ssize_t how;
    if (site->type == t && site->tag == t->tp_version_tag && (t->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)) {
        how = site->how;
    } else {
        how = attr_how(t, name); /* assigns the type a version tag when it has none */
        site->type = NULL;
        if ((t->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) && t->tp_version_tag) {
            site->tag = t->tp_version_tag;
            site->how = how;
            site->type = t;
        }
    }
    if (how < 0) {
        PyObject **dp = _PyObject_GetDictPtr(o);
        if (dp && *dp) {
            PyObject *v = PyDict_GetItemWithError(*dp, name); /* borrowed */
            if (v) return Py_NewRef(v);
            if (PyErr_Occurred()) return NULL;
        }
    } else if (how > 0) {
        PyObject *v = *(PyObject **)((char *)o + how);
        if (v) return Py_NewRef(v);
    }
    return PyObject_GetAttr(o, name);
}

/* the sites of the launch path */
static attr_site site_usm_handle, site_queue_handle, site_queue_closed, site_stream_queue, site_closed, site_events,
    site_hooks, site_globals;

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

typedef struct {
    PyObject_HEAD
    uint64_t *starts;
    uint64_t *ends;
    Py_ssize_t n, cap;
    uint64_t generation; /* bumped on every removal: kernels re-bind pointers after a free */
} AllocTable;

static PyTypeObject AllocTableType;

static void table_dealloc(AllocTable *t) {
    PyMem_Free(t->starts);
    PyMem_Free(t->ends);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

/* Index of the allocation holding addr, or -1. */
static Py_ssize_t table_find(const AllocTable *t, uint64_t addr) {
    if (t->n == 0 || addr < t->starts[0]) return -1; /* below every allocation: a small integer */
    Py_ssize_t lo = 0, hi = t->n;
    while (lo < hi) { /* first start > addr */
        Py_ssize_t mid = (lo + hi) / 2;
        if (t->starts[mid] <= addr) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0) return -1;
    return addr < t->ends[lo - 1] ? lo - 1 : -1;
}

static int read_u64(PyObject *o, uint64_t *out) {
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    *out = (uint64_t)v;
    return 0;
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

typedef struct {
    PyObject_HEAD
    void *kernel; /* NULL once closed */
    int form;
    set_value_fn set_value;
    set_pointer_fn set_pointer;
    set_local_fn set_local;
    void *launch;
    Py_ssize_t nparams;
    char kinds[MAX_PARAMS];
    uint64_t last[MAX_PARAMS];
    unsigned char valid[MAX_PARAMS];
    /* hidden arguments at nparams, nparams+1, ...: 'P' pointer (value = address) or 'L' local (size) */
    Py_ssize_t nhidden;
    char hidden_kinds[MAX_HIDDEN];
    uint64_t hidden_values[MAX_HIDDEN];
    int hidden_dirty;
    /* FORM_WITH_ARGS: the argument array, filled once; each launch writes only values */
    uint64_t store[MAX_PARAMS];
    kernel_arg_t args[MAX_PARAMS + MAX_HIDDEN];
    uint64_t seen_generation;
    size_t local[3];
    AllocTable *table;
    PyObject *on_arg_error;
    PyObject *on_ur_error;
    PyObject *ptr_name; /* "ptr" */
} Launcher;

static PyTypeObject LauncherType;

static void launcher_dealloc(Launcher *l) {
    Py_XDECREF(l->table);
    Py_XDECREF(l->on_arg_error);
    Py_XDECREF(l->on_ur_error);
    Py_XDECREF(l->ptr_name);
    Py_TYPE(l)->tp_free((PyObject *)l);
}

static void *fnptr(PyObject *o) {
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    return (void *)(uintptr_t)v;
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


/* What a caller already read from an argument while matching it (GridCall's key match): the
 * launch converts from these instead of reading the object again. tag 0: nothing, read the object. */
typedef struct {
    unsigned char tag; /* PRE_INT (an exact int that fits a long long), PRE_FLOAT (an exact float), PRE_OWN */
    uint64_t v;        /* the long long's bits, the double's bits, or the address of xpukit's own memory */
} pre_t;
enum { PRE_NONE = 0, PRE_INT = 1, PRE_FLOAT = 2, PRE_OWN = 3 };

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

/* ------------------------------------------------------------------ fast_key */

/* The integer class of o as a key element (see fast_key); pre (or NULL): the value, when it fits. */
static long int_key_code(PyObject *o, char mode, AllocTable *table, pre_t *pre) {
    long code;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow > 0) {
        unsigned long long u = PyLong_AsUnsignedLongLong(o);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            code = 3; /* beyond u64: Triton's i64 path, then an error at launch */
        } else {
            code = 2 | ((u % 16 == 0) << 3);
        }
    } else if (overflow < 0) {
        code = 3;
    } else {
        if (pre) {
            pre->tag = PRE_INT;
            pre->v = (uint64_t)v;
        }
        int usm_small = v > 0 && v < 0x80000000LL && table_find(table, (uint64_t)v) >= 0;
        code = (v >= INT32_MIN && v <= INT32_MAX && !usm_small) ? 0 : 1;
        code |= (v == 1) << 2;
        code |= ((v % 16) == 0) << 3;
    }
    if (mode == 'v') code &= 3;      /* not specialized on value */
    else if (mode == 'a') code &= 7; /* not on alignment */
    return code;
}

/* The address of device memory (an object with an int .ptr); 0 when the key does not cover it.
 * pre (or NULL): the address, when it is xpukit's own memory (read as the launch reads it). */
static int memory_key_addr(PyObject *o, uint64_t *addr, pre_t *pre) {
    int own = own_address(o, addr);
    if (own < 0) return 0; /* closed: Triton's path reports it */
    if (own == 0 && pre) {
        pre->tag = PRE_OWN;
        pre->v = *addr;
    }
    if (own > 0) {
        PyObject *p = PyObject_GetAttr(o, str_ptr);
        if (!p) {
            PyErr_Clear();
            return 0;
        }
        int bad = !PyLong_Check(p) || read_u64(p, addr);
        Py_DECREF(p);
        if (bad) {
            PyErr_Clear();
            return 0;
        }
    }
    return 1;
}

/* fast_key(args, kwargs, modes, table) -> tuple | None
 * A key at least as fine as Triton 3.3's specialization of these arguments: equal keys mean
 * Triton would pick the same compiled kernel. modes: one letter per positional parameter:
 * 'c' constexpr (the value and its type), 's' specialized, 'v' do_not_specialize,
 * 'a' do_not_specialize_on_alignment. None: an argument this key does not cover (the caller
 * takes Triton's own path). */
static PyObject *fast_key(PyObject *self, PyObject *const *a, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 4 || !PyTuple_Check(a[0]) || !PyBytes_Check(a[2]) ||
        !PyObject_TypeCheck(a[3], &AllocTableType))
        return PyErr_Format(PyExc_TypeError, "fast_key(args: tuple, kwargs: dict|None, modes: bytes, table)");
    PyObject *args = a[0], *kwargs = a[1];
    const char *modes = PyBytes_AS_STRING(a[2]);
    Py_ssize_t nmodes = PyBytes_GET_SIZE(a[2]);
    AllocTable *table = (AllocTable *)a[3];
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (n > nmodes) Py_RETURN_NONE;
    Py_ssize_t nkw = (kwargs && PyDict_Check(kwargs)) ? PyDict_GET_SIZE(kwargs) : 0;
    PyObject *key = PyTuple_New(n + 3 * nkw);
    if (!key) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyTuple_GET_ITEM(args, i), *k = NULL;
        char mode = modes[i];
        PyTypeObject *t = Py_TYPE(o);
        if (mode == 'c') {
            if (PyObject_Hash(o) == -1) {
                PyErr_Clear();
                goto uncovered;
            }
            k = PyTuple_Pack(2, (PyObject *)t, o);
        } else if (t == &PyLong_Type) {
            k = PyLong_FromLong(int_key_code(o, mode, table, NULL));
        } else if (t == &PyFloat_Type) {
            k = PyLong_FromLong(16);
        } else if (t == &PyBool_Type) {
            k = PyLong_FromLong(17);
        } else if (o == Py_None) {
            k = PyLong_FromLong(18);
        } else {
            /* device memory: an object with an int .ptr (USMAllocation, DeviceArray) */
            uint64_t addr;
            if (!memory_key_addr(o, &addr, NULL)) goto uncovered;
            int div16 = mode == 's' ? (addr % 16 == 0) : 0;
            PyObject *dtype = dtype_of(o);
            if (!dtype) {
                /* untyped memory: specialized like an address (i64, u64 above 2**63) */
                k = PyLong_FromLong(32 | ((addr >= 0x8000000000000000ULL) << 1) | (div16 << 3));
            } else {
                PyObject *flag = PyLong_FromLong(64 | (div16 << 3));
                k = flag ? PyTuple_Pack(3, (PyObject *)t, dtype, flag) : NULL;
                Py_XDECREF(flag);
                Py_DECREF(dtype);
                if (k && PyObject_Hash(k) == -1) {
                    PyErr_Clear();
                    Py_DECREF(k);
                    goto uncovered;
                }
            }
        }
        if (!k) {
            Py_DECREF(key);
            return NULL;
        }
        PyTuple_SET_ITEM(key, i, k);
        continue;
    uncovered:
        Py_DECREF(key);
        Py_RETURN_NONE;
    }
    if (nkw) {
        Py_ssize_t pos = 0, j = n;
        PyObject *name, *value;
        while (PyDict_Next(kwargs, &pos, &name, &value)) {
            if (PyObject_Hash(value) == -1) {
                PyErr_Clear();
                Py_DECREF(key);
                Py_RETURN_NONE;
            }
            Py_INCREF(name);
            PyTuple_SET_ITEM(key, j++, name);
            Py_INCREF((PyObject *)Py_TYPE(value));
            PyTuple_SET_ITEM(key, j++, (PyObject *)Py_TYPE(value));
            Py_INCREF(value);
            PyTuple_SET_ITEM(key, j++, value);
        }
    }
    return key;
}

/* Does fast_key(args, kwargs, ...) equal key? The same comparison a dict lookup of that key makes
 * (element by element, identity or ==; a dtype also by its type), without building it. */
static int same_value(PyObject *a, PyObject *b) {
    if (a == b) return 1;
    if (Py_TYPE(a) != Py_TYPE(b)) return 0;
    int r = PyObject_RichCompareBool(a, b, Py_EQ);
    if (r < 0) PyErr_Clear();
    return r > 0;
}

static PyObject *small_ints[128]; /* CPython's cached ints 0..127: what PyLong_FromLong gives for a key code */

static int long_is(PyObject *k, long want) {
    if (want >= 0 && want < 128 && k == small_ints[want]) return 1; /* the same object: equal */
    if (!PyLong_CheckExact(k)) return 0;
    long v = PyLong_AsLong(k);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return v == want;
}

/* pre (or NULL): one per positional argument, what the match read (zeroed first; see pre_t). */
static int key_matches(PyObject *key, PyObject *args, PyObject *kwargs, PyObject *modes_bytes, AllocTable *table,
                       pre_t *pre) {
    const char *modes = PyBytes_AS_STRING(modes_bytes);
    Py_ssize_t n = PyTuple_GET_SIZE(args), nkw = kwargs ? PyDict_GET_SIZE(kwargs) : 0;
    if (n > PyBytes_GET_SIZE(modes_bytes) || PyTuple_GET_SIZE(key) != n + 3 * nkw || n > MAX_PARAMS) return 0;
    if (pre) memset(pre, 0, n * sizeof *pre);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyTuple_GET_ITEM(args, i), *k = PyTuple_GET_ITEM(key, i);
        PyTypeObject *t = Py_TYPE(o);
        char mode = modes[i];
        if (mode == 'c') {
            if (!PyTuple_CheckExact(k) || PyTuple_GET_SIZE(k) != 2 || PyTuple_GET_ITEM(k, 0) != (PyObject *)t ||
                !same_value(PyTuple_GET_ITEM(k, 1), o))
                return 0;
        } else if (t == &PyLong_Type) {
            if (!long_is(k, int_key_code(o, mode, table, pre ? &pre[i] : NULL))) return 0;
        } else if (t == &PyFloat_Type) {
            if (!long_is(k, 16)) return 0;
            if (pre) {
                double d = PyFloat_AS_DOUBLE(o);
                pre[i].tag = PRE_FLOAT;
                memcpy(&pre[i].v, &d, 8);
            }
        } else if (t == &PyBool_Type) {
            if (!long_is(k, 17)) return 0;
        } else if (o == Py_None) {
            if (!long_is(k, 18)) return 0;
        } else {
            uint64_t addr;
            if (!memory_key_addr(o, &addr, pre ? &pre[i] : NULL)) return 0;
            int div16 = mode == 's' ? (addr % 16 == 0) : 0;
            PyObject *dtype = dtype_of(o);
            if (!dtype) {
                if (!long_is(k, 32 | ((addr >= 0x8000000000000000ULL) << 1) | (div16 << 3))) return 0;
                continue;
            }
            int ok = PyTuple_CheckExact(k) && PyTuple_GET_SIZE(k) == 3 && PyTuple_GET_ITEM(k, 0) == (PyObject *)t &&
                     long_is(PyTuple_GET_ITEM(k, 2), 64 | (div16 << 3)) && same_value(PyTuple_GET_ITEM(k, 1), dtype);
            Py_DECREF(dtype);
            if (!ok) return 0;
        }
    }
    if (nkw) {
        Py_ssize_t pos = 0, j = n;
        PyObject *name, *value;
        while (PyDict_Next(kwargs, &pos, &name, &value)) {
            if (!same_value(PyTuple_GET_ITEM(key, j), name) ||
                PyTuple_GET_ITEM(key, j + 1) != (PyObject *)Py_TYPE(value) ||
                !same_value(PyTuple_GET_ITEM(key, j + 2), value))
                return 0;
            j += 3;
        }
    }
    return 1;
}

/* The Launcher whose bound launch() f is, or NULL. */
static Launcher *launcher_of(PyObject *f) {
    if (!PyCFunction_Check(f) || PyCFunction_GET_FUNCTION(f) != (PyCFunction)(void (*)(void))launcher_launch)
        return NULL;
    PyObject *self = PyCFunction_GET_SELF(f);
    return self && Py_TYPE(self) == &LauncherType ? (Launcher *)self : NULL;
}

/* ------------------------------------------------------------------ Dispatch */

/* kernel[grid](*args, **kwargs) for a call seen before, in one C call: the same steps as the
 * compiled-launch table's Python door (xpukit/runtime/triton/fast_table.py, PyDispatch), which
 * this must match; every case it does not cover is handed to that door (fallback(fn) gives
 * Triton's ``run``, as the kit wrapped it), so both refuse and launch the same things.
 *
 * Dispatch(fn, hits, modes, current, compiled_kernel): one per JITFunction. hits: the table's
 * dict (table_key, fast_key) -> (session, submit, index, kernel, entry), filled by the Python
 * door when Triton's own run has compiled and launched; current: the ContextVar of the active
 * session record. d[grid] gives a GridCall; calling it launches. */
typedef struct {
    PyObject_HEAD
    PyObject *fn, *hits, *modes, *current, *ck;
    /* the last activation seen, and what the call reads from it (refreshed when it changes) */
    PyObject *act, *session, *stream, *table_key, *stats, *alloc;
    /* the last key that hit, its table key and its entry: a repeated call is matched against it
     * without building a key; forget() (called when the table records) drops it */
    PyObject *last_key, *last_table_key, *last_hit;
    PyObject *last_call; /* the GridCall made for the last grid object: reused while the same object comes */
    /* the last hit's argument positions (a tuple of ints) read into C: valid while idx_owner is
     * that same tuple object (held, so never another object at the same address) */
    PyObject *idx_owner;
    Py_ssize_t idx_n;
    Py_ssize_t idx[MAX_PARAMS];
} Dispatch;

typedef struct {
    PyObject_HEAD
    Dispatch *d;
    PyObject *grid;
} GridCall;

static PyTypeObject DispatchType, GridCallType;
static PyObject *str_session, *str_stream, *str_table_key, *str_driver, *str_stats, *str_allocations, *str_closed,
    *str_events, *str_queue, *str_pre_run_hooks, *str_enter_hook, *str_exit_hook, *str_used_global_vals,
    *str_launches, *str_meta, *str_run, *str_grid, *str_warmup, *int_one;

static int dispatch_traverse(Dispatch *d, visitproc visit, void *arg) {
    Py_VISIT(d->fn);
    Py_VISIT(d->hits);
    Py_VISIT(d->act);
    Py_VISIT(d->session);
    Py_VISIT(d->stream);
    Py_VISIT(d->stats);
    Py_VISIT(d->last_key);
    Py_VISIT(d->last_hit);
    Py_VISIT(d->last_call);
    return 0;
}

static int dispatch_clear(Dispatch *d) {
    Py_CLEAR(d->fn);
    Py_CLEAR(d->hits);
    Py_CLEAR(d->modes);
    Py_CLEAR(d->current);
    Py_CLEAR(d->ck);
    Py_CLEAR(d->act);
    Py_CLEAR(d->session);
    Py_CLEAR(d->stream);
    Py_CLEAR(d->table_key);
    Py_CLEAR(d->stats);
    Py_CLEAR(d->alloc);
    Py_CLEAR(d->last_key);
    Py_CLEAR(d->last_table_key);
    Py_CLEAR(d->last_hit);
    Py_CLEAR(d->last_call);
    Py_CLEAR(d->idx_owner);
    return 0;
}

static void dispatch_dealloc(Dispatch *d) {
    PyObject_GC_UnTrack(d);
    dispatch_clear(d);
    Py_TYPE(d)->tp_free((PyObject *)d);
}

static int dispatch_init(Dispatch *d, PyObject *args, PyObject *kw) {
    PyObject *fn, *hits, *modes, *current, *ck;
    if (kw && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "Dispatch takes positional arguments only");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "OO!O!OO", &fn, &PyDict_Type, &hits, &PyBytes_Type, &modes, &current, &ck)) return -1;
    if (!PyContextVar_CheckExact(current)) {
        PyErr_SetString(PyExc_TypeError, "current must be a ContextVar");
        return -1;
    }
    dispatch_clear(d);
    Py_INCREF(fn);
    d->fn = fn;
    Py_INCREF(hits);
    d->hits = hits;
    Py_INCREF(modes);
    d->modes = modes;
    Py_INCREF(current);
    d->current = current;
    Py_INCREF(ck);
    d->ck = ck;
    return 0;
}

/* 1: attr is truthy (or missing/failing: treated as "take the Python door"), 0: falsy. */
static int truthy_attr(attr_site *site, PyObject *o, PyObject *name) {
    PyObject *v = inst_attr(site, o, name);
    if (!v) {
        PyErr_Clear();
        return 1;
    }
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    if (r < 0) {
        PyErr_Clear();
        return 1;
    }
    return r;
}

static int not_none_attr(attr_site *site, PyObject *o, PyObject *name) {
    PyObject *v = site ? inst_attr(site, o, name) : PyObject_GetAttr(o, name);
    if (!v) {
        PyErr_Clear();
        return 1;
    }
    int r = v != Py_None;
    Py_DECREF(v);
    return r;
}

/* CompiledKernel.launch_enter_hook is not None (a class attribute: read from the class's MRO, as
 * getattr on the class reads it when no metaclass descriptor of that name exists). */
static int class_attr_set(PyObject *cls, PyObject *name) {
    if (!PyType_Check(cls)) return not_none_attr(NULL, cls, name);
    PyObject *v = _PyType_Lookup((PyTypeObject *)cls, name); /* borrowed */
    if (v && (Py_TYPE(v)->tp_descr_get || _PyType_Lookup(Py_TYPE(cls), name)))
        return not_none_attr(NULL, cls, name); /* a descriptor takes part: the full lookup */
    return v != NULL && v != Py_None;
}

/* stats.launches += 1 for a plain instance (a dataclass): the instance dict itself when nothing
 * on the type takes part (no __getattr__/__setattr__, no descriptor of that name), else getattr/setattr. */
static int bump_counter(PyObject *o, PyObject *name) {
    PyTypeObject *t = Py_TYPE(o);
    PyObject *cls_attr = _PyType_Lookup(t, name); /* borrowed; a dataclass keeps the default here */
    if (t->tp_getattro == PyObject_GenericGetAttr && t->tp_setattro == PyObject_GenericSetAttr &&
        (!cls_attr || (!Py_TYPE(cls_attr)->tp_descr_get && !Py_TYPE(cls_attr)->tp_descr_set))) {
        PyObject **dp = _PyObject_GetDictPtr(o);
        PyObject *count = dp && *dp ? PyDict_GetItemWithError(*dp, name) : NULL; /* borrowed */
        if (count && PyLong_CheckExact(count)) {
            PyObject *dict = Py_NewRef(*dp), *next = PyNumber_Add(count, int_one);
            int rc = next ? PyDict_SetItem(dict, name, next) : -1;
            Py_XDECREF(next);
            Py_DECREF(dict);
            return rc;
        }
        if (PyErr_Occurred()) return -1;
    }
    PyObject *count = PyObject_GetAttr(o, name);
    PyObject *next = count ? PyNumber_Add(count, int_one) : NULL;
    Py_XDECREF(count);
    int rc = next ? PyObject_SetAttr(o, name, next) : -1;
    Py_XDECREF(next);
    return rc;
}

/* Read what the call needs from a new activation record; -1 (error cleared) if it lacks any. */
static int dispatch_refresh(Dispatch *d, PyObject *act) {
    PyObject *session = PyObject_GetAttr(act, str_session);
    PyObject *stream = session ? PyObject_GetAttr(act, str_stream) : NULL;
    PyObject *table_key = stream ? PyObject_GetAttr(act, str_table_key) : NULL;
    PyObject *driver = table_key ? PyObject_GetAttr(act, str_driver) : NULL;
    PyObject *stats = driver ? PyObject_GetAttr(driver, str_stats) : NULL;
    PyObject *alloc = stats ? PyObject_GetAttr(session, str_allocations) : NULL;
    Py_XDECREF(driver);
    if (!alloc || !PyObject_TypeCheck(alloc, &AllocTableType)) {
        PyErr_Clear();
        Py_XDECREF(session);
        Py_XDECREF(stream);
        Py_XDECREF(table_key);
        Py_XDECREF(stats);
        Py_XDECREF(alloc);
        return -1;
    }
    Py_INCREF(act);
    Py_XSETREF(d->act, act);
    Py_XSETREF(d->session, session);
    Py_XSETREF(d->stream, stream);
    Py_XSETREF(d->table_key, table_key);
    Py_XSETREF(d->stats, stats);
    Py_XSETREF(d->alloc, alloc);
    return 0;
}

/* The Python door: fn.run(*args, grid=grid, warmup=False, **kwargs), looked up now (activate()
 * swaps JITFunction.run in and out). */
static PyObject *dispatch_fallback(Dispatch *d, PyObject *grid, PyObject *args, PyObject *kwargs) {
    PyObject *run = PyObject_GetAttr(d->fn, str_run);
    if (!run) return NULL;
    PyObject *kw = kwargs ? PyDict_Copy(kwargs) : PyDict_New();
    PyObject *r = NULL;
    if (kw && PyDict_SetItem(kw, str_grid, grid) == 0 && PyDict_SetItem(kw, str_warmup, Py_False) == 0)
        r = PyObject_Call(run, args, kw);
    Py_XDECREF(kw);
    Py_DECREF(run);
    return r;
}

static PyObject *gridcall_call(GridCall *g, PyObject *args, PyObject *kwargs) {
    Dispatch *d = g->d;
    PyObject *act = NULL;
    if (PyContextVar_Get(d->current, NULL, &act) < 0) return NULL;
    if (!act || act == Py_None) goto python_door; /* no session: the door raises NoActiveSession */
    if (act != d->act && dispatch_refresh(d, act) < 0) goto python_door;
    /* a deallocation run by the refresh may have let another thread refresh d in between */
    if (act != d->act) goto python_door;
    /* Borrowed from here on, never re-read from d: Python code run below (a .ptr property, a
     * grid function) may let another thread refresh d with its own activation. act, which this
     * call holds, keeps them alive. */
    PyObject *session = d->session, *stream = d->stream, *table_key = d->table_key, *stats = d->stats;
    PyObject *alloc = d->alloc;
    if (truthy_attr(&site_closed, session, str_closed) || not_none_attr(&site_events, stream, str_events) ||
        truthy_attr(&site_hooks, d->fn, str_pre_run_hooks) || class_attr_set(d->ck, str_enter_hook) ||
        class_attr_set(d->ck, str_exit_hook) || truthy_attr(&site_globals, d->fn, str_used_global_vals))
        goto python_door;
    {
        PyObject *hit = NULL; /* owned */
        PyObject *last_key = d->last_key, *last_hit = d->last_hit;
        /* before any argument is read: a free from here on makes the launch check every address again */
        uint64_t generation = ((AllocTable *)alloc)->generation;
        pre_t pre[MAX_PARAMS]; /* what the key match read, handed to the launch (one pass over the arguments) */
        int have_pre = 0;
        if (last_key && last_hit && d->last_table_key == table_key) {
            /* held: matching may run Python code (a .ptr property), and another thread may replace them */
            Py_INCREF(last_key);
            Py_INCREF(last_hit);
            if (key_matches(last_key, args, kwargs, d->modes, (AllocTable *)alloc, pre) &&
                PyTuple_Check(last_hit) && PyTuple_GET_SIZE(last_hit) == 5 && PyTuple_GET_ITEM(last_hit, 0) == session) {
                hit = last_hit;
                have_pre = 1;
            } else {
                Py_DECREF(last_hit);
            }
            Py_DECREF(last_key);
            if (PyErr_Occurred()) PyErr_Clear();
        }
        if (!hit) {
            PyObject *fk_args[4] = {args, kwargs ? kwargs : Py_None, d->modes, alloc};
            PyObject *key = fast_key(NULL, fk_args, 4);
            if (!key) goto error;
            if (key == Py_None) {
                Py_DECREF(key);
                goto python_door;
            }
            PyObject *k2 = PyTuple_Pack(2, table_key, key);
            if (!k2) {
                Py_DECREF(key);
                goto error;
            }
            hit = PyDict_GetItemWithError(d->hits, k2); /* borrowed */
            Py_DECREF(k2);
            if (!hit) {
                Py_DECREF(key);
                if (PyErr_Occurred()) goto error;
                goto python_door;
            }
            Py_INCREF(hit);
            Py_INCREF(table_key);
            Py_XSETREF(d->last_table_key, table_key);
            Py_XSETREF(d->last_key, key);
            Py_INCREF(hit);
            Py_XSETREF(d->last_hit, hit);
        }
        if (!PyTuple_Check(hit) || PyTuple_GET_SIZE(hit) != 5 || PyTuple_GET_ITEM(hit, 0) != session) {
            Py_DECREF(hit);
            goto python_door; /* another session's: the Python door finds this one's */
        }
        PyObject *submit = PyTuple_GET_ITEM(hit, 1), *index = PyTuple_GET_ITEM(hit, 2);
        PyObject *kernel = PyTuple_GET_ITEM(hit, 3), *entry = PyTuple_GET_ITEM(hit, 4);
        /* the grid: a tuple/list of 1 to 3, or a callable of the launch's meta-parameters */
        PyObject *grid = g->grid;
        Py_INCREF(grid);
        if (!PyTuple_Check(grid) && !PyList_Check(grid) && PyCallable_Check(grid)) {
            PyObject *kw = kwargs ? Py_NewRef(kwargs) : PyDict_New();
            PyObject *meta = kw ? PyObject_CallMethodObjArgs(entry, str_meta, args, kw, NULL) : NULL;
            Py_XDECREF(kw);
            PyObject *r = meta ? PyObject_CallOneArg(grid, meta) : NULL;
            Py_XDECREF(meta);
            Py_DECREF(grid);
            if (!r) {
                Py_DECREF(hit);
                goto error;
            }
            grid = r;
        }
        PyObject *gseq = (PyTuple_Check(grid) || PyList_Check(grid)) ? PySequence_Tuple(grid) : NULL;
        Py_DECREF(grid);
        Py_ssize_t gn = gseq ? PyTuple_GET_SIZE(gseq) : 0;
        if (gn < 1 || gn > 3) { /* the Python door names the bad grid */
            PyErr_Clear();
            Py_XDECREF(gseq);
            Py_DECREF(hit);
            goto python_door;
        }
        PyObject *queue = NULL;
        PyObject *q = inst_attr(&site_stream_queue, stream, str_queue);
        if (q) {
            queue = inst_attr(&site_queue_handle, q, str_handle);
            Py_DECREF(q);
        }
        if (!queue || queue == Py_None) { /* closed: the Python door raises the kit's error */
            PyErr_Clear();
            Py_XDECREF(queue);
            Py_DECREF(gseq);
            Py_DECREF(hit);
            goto python_door;
        }
        PyObject *r = NULL;
        Launcher *lf = launcher_of(submit);
        if (lf && lf->kernel && lf->table == (AllocTable *)alloc && PyLong_CheckExact(queue)) {
            /* submit is the kernel's own checked launcher (no scratch to grow): launch from here,
             * from the values the match read, without a call, an argument tuple or a second read */
            void *qh = fnptr(queue);
            if (!qh) {
                PyErr_Clear();
                goto vectorcall;
            }
            size_t gs[3];
            for (int i = 0; i < 3; i++) {
                PyObject *gi = i < gn ? PyTuple_GET_ITEM(gseq, i) : int_one;
                if (get_grid(gi, &gs[i])) {
                    Py_INCREF(gi);
                    Py_DECREF(queue);
                    Py_DECREF(gseq);
                    Py_DECREF(hit);
                    arg_error(lf, -1, ARG_GRID, gi);
                    Py_DECREF(gi);
                    goto error;
                }
            }
            Py_ssize_t na = PyTuple_GET_SIZE(args);
            PyObject *const *items = &PyTuple_GET_ITEM(args, 0);
            Py_ssize_t m = na;
            const pre_t *pl = have_pre ? pre : NULL;
            PyObject *picked_items[MAX_PARAMS];
            pre_t picked_pre[MAX_PARAMS];
            if (index != Py_None) {
                m = PyTuple_GET_SIZE(index);
                if (m > MAX_PARAMS || !PyTuple_CheckExact(index)) goto vectorcall;
                if (index != d->idx_owner) { /* read the positions once per recorded entry */
                    Py_ssize_t ix[MAX_PARAMS];
                    for (Py_ssize_t j = 0; j < m; j++) {
                        PyObject *o = PyTuple_GET_ITEM(index, j);
                        ix[j] = PyLong_CheckExact(o) ? PyLong_AsSsize_t(o) : -1;
                        if (ix[j] < 0) { /* cannot happen for a recorded key; the call below names it */
                            PyErr_Clear();
                            goto vectorcall;
                        }
                    }
                    /* nothing runs between filling the array and naming its owner (ints only) */
                    memcpy(d->idx, ix, m * sizeof ix[0]);
                    d->idx_n = m;
                    Py_INCREF(index);
                    Py_XSETREF(d->idx_owner, index);
                }
                for (Py_ssize_t j = 0; j < m; j++) {
                    Py_ssize_t i = d->idx[j];
                    if (i >= na) goto vectorcall; /* cannot happen for a recorded key; the call below names it */
                    picked_items[j] = PyTuple_GET_ITEM(args, i);
                    if (pl) picked_pre[j] = pre[i];
                }
                items = picked_items;
                if (pl) pl = picked_pre;
            }
            r = launch_core(lf, qh, gs, items, m, 0, pl, generation);
            goto launched;
        }
    vectorcall:;
        PyObject *picked;
        if (index == Py_None) {
            Py_INCREF(args);
            picked = args;
        } else {
            Py_ssize_t m = PyTuple_GET_SIZE(index), na = PyTuple_GET_SIZE(args);
            picked = PyTuple_New(m);
            for (Py_ssize_t j = 0; picked && j < m; j++) {
                Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(index, j));
                if (i < 0 || i >= na) { /* cannot happen for a recorded key; be safe */
                    Py_CLEAR(picked);
                    PyErr_SetString(PyExc_IndexError, "xpukit: argument index out of range");
                    break;
                }
                PyObject *o = PyTuple_GET_ITEM(args, i);
                Py_INCREF(o);
                PyTuple_SET_ITEM(picked, j, o);
            }
        }
        if (picked) {
            PyObject *call[5] = {queue, PyTuple_GET_ITEM(gseq, 0), gn > 1 ? PyTuple_GET_ITEM(gseq, 1) : int_one,
                                 gn > 2 ? PyTuple_GET_ITEM(gseq, 2) : int_one, picked};
            r = PyObject_Vectorcall(submit, call, 5, NULL);
            Py_DECREF(picked);
        }
    launched:
        Py_DECREF(queue);
        Py_DECREF(gseq);
        if (!r) {
            Py_DECREF(hit);
            goto error;
        }
        Py_DECREF(r); /* an event handle only when asked for: None here */
        /* driver.stats.launches += 1 */
        if (bump_counter(stats, str_launches) < 0) {
            Py_DECREF(hit);
            goto error;
        }
        Py_INCREF(kernel);
        Py_DECREF(hit);
        Py_XDECREF(act);
        return kernel;
    }
python_door:
    Py_XDECREF(act);
    return dispatch_fallback(d, g->grid, args, kwargs);
error:
    Py_XDECREF(act);
    return NULL;
}

static int gridcall_traverse(GridCall *g, visitproc visit, void *arg) {
    Py_VISIT(g->d);
    Py_VISIT(g->grid);
    return 0;
}

static int gridcall_clear(GridCall *g) {
    Py_CLEAR(g->d);
    Py_CLEAR(g->grid);
    return 0;
}

static void gridcall_dealloc(GridCall *g) {
    PyObject_GC_UnTrack(g);
    gridcall_clear(g);
    Py_TYPE(g)->tp_free((PyObject *)g);
}

/* d[grid] -> GridCall (the same one again for the same grid object: a GridCall holds nothing else) */
static PyObject *dispatch_getitem(Dispatch *d, PyObject *grid) {
    if (d->last_call && ((GridCall *)d->last_call)->grid == grid) return Py_NewRef(d->last_call);
    GridCall *g = PyObject_GC_New(GridCall, &GridCallType);
    if (!g) return NULL;
    Py_INCREF(d);
    g->d = d;
    Py_INCREF(grid);
    g->grid = grid;
    PyObject_GC_Track(g);
    Py_INCREF(g);
    Py_XSETREF(d->last_call, (PyObject *)g);
    return (PyObject *)g;
}

static PyObject *dispatch_forget(Dispatch *d, PyObject *unused) {
    (void)unused;
    Py_CLEAR(d->last_key);
    Py_CLEAR(d->last_table_key);
    Py_CLEAR(d->last_hit);
    Py_RETURN_NONE;
}

static PyMethodDef dispatch_methods[] = {
    {"forget", (PyCFunction)dispatch_forget, METH_NOARGS, "the table recorded an entry: match nothing from memory"},
    {NULL, NULL, 0, NULL},
};

static PyMappingMethods dispatch_as_mapping = {.mp_subscript = (binaryfunc)dispatch_getitem};

static PyTypeObject DispatchType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_xpukit_launcher.Dispatch",
    .tp_basicsize = sizeof(Dispatch),
    .tp_dealloc = (destructor)dispatch_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "kernel[grid] for a JITFunction: a seen signature launches in C, anything else goes to Triton's run.",
    .tp_traverse = (traverseproc)dispatch_traverse,
    .tp_clear = (inquiry)dispatch_clear,
    .tp_as_mapping = &dispatch_as_mapping,
    .tp_methods = dispatch_methods,
    .tp_init = (initproc)dispatch_init,
    .tp_new = PyType_GenericNew,
};

static PyTypeObject GridCallType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_xpukit_launcher.GridCall",
    .tp_basicsize = sizeof(GridCall),
    .tp_dealloc = (destructor)gridcall_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "kernel[grid]: call it with the kernel's arguments.",
    .tp_traverse = (traverseproc)gridcall_traverse,
    .tp_clear = (inquiry)gridcall_clear,
    .tp_call = (ternaryfunc)gridcall_call,
};

/* ------------------------------------------------------------------ Direct */

/* BoundKernel.launch in C for its common call, bk.launch((gx[, gy[, gz]]), *args) with no keyword
 * on a kernel with no scratch to grow: the same steps as the Python method (the queue's handle,
 * the kernel's checked launcher) without its frame. Every other call (a callable or list grid,
 * queue= or event=, a closed queue) is that Python method (fallback), which raises the kit's errors.
 * Direct(launcher, queue, fallback). */
typedef struct {
    PyObject_HEAD
    PyObject *launcher, *queue, *fallback;
    vectorcallfunc vectorcall;
} Direct;

static PyTypeObject DirectType;

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
    /* h = q._handle; if h is None or q._closed: the property raises (the Python method) */
    PyObject *h = inst_attr(&site_queue_handle, d->queue, str_handle);
    if (!h || h == Py_None || !PyLong_CheckExact(h) || truthy_attr(&site_queue_closed, d->queue, str_closed)) {
        PyErr_Clear();
        Py_XDECREF(h);
        return direct_fallback(d, args, nargsf, kwnames);
    }
    Launcher *l = (Launcher *)d->launcher;
    /* from here on, launcher.launch(h, *grid, args) */
    if (!l->kernel) {
        Py_DECREF(h);
        return arg_error(l, -1, ARG_CLOSED, Py_None);
    }
    void *queue = fnptr(h);
    Py_DECREF(h);
    if (!queue) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "null queue handle");
        return NULL;
    }
    size_t g[3];
    for (int i = 0; i < 3; i++) {
        PyObject *gi = i < gn ? PyTuple_GET_ITEM(grid, i) : int_one;
        if (get_grid(gi, &g[i])) return arg_error(l, -1, ARG_GRID, gi);
    }
    /* args stay alive for the call (the caller's), and a vectorcall's array does not move */
    return launch_core(l, queue, g, args + 1, nargs - 1, 0, NULL, l->table->generation);
}

static PyObject *direct_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *launcher, *queue, *fallback;
    if (kw && PyDict_GET_SIZE(kw)) return PyErr_Format(PyExc_TypeError, "Direct takes positional arguments only");
    if (!PyArg_ParseTuple(args, "O!OO", &LauncherType, &launcher, &queue, &fallback)) return NULL;
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

static PyTypeObject DirectType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_xpukit_launcher.Direct",
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
    {"fast_key", (PyCFunction)(void (*)(void))fast_key, METH_FASTCALL,
     "fast_key(args, kwargs, modes, table) -> a specialization key, or None"},
    {"register_memory_types", register_memory_types, METH_VARARGS,
     "register_memory_types(USMAllocation, DeviceArray): read their addresses without properties"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_xpukit_launcher", "xpukit's compiled launch path (see xpukit/runtime/ur/launcher.py)",
    -1, module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__xpukit_launcher(void) {
    if (PyType_Ready(&AllocTableType) < 0 || PyType_Ready(&LauncherType) < 0 || PyType_Ready(&DispatchType) < 0 ||
        PyType_Ready(&GridCallType) < 0 || PyType_Ready(&DirectType) < 0)
        return NULL;
    str_handle = PyUnicode_InternFromString("_handle");
    str_alloc = PyUnicode_InternFromString("alloc");
    str_ptr = PyUnicode_InternFromString("ptr");
    str_dtype = PyUnicode_InternFromString("dtype");
    if (!str_handle || !str_alloc || !str_ptr || !str_dtype) return NULL;
    struct {
        PyObject **slot;
        const char *text;
    } names[] = {
        {&str_session, "session"}, {&str_stream, "stream"}, {&str_table_key, "table_key"}, {&str_driver, "driver"},
        {&str_stats, "stats"}, {&str_allocations, "allocations"}, {&str_closed, "_closed"}, {&str_events, "events"},
        {&str_queue, "queue"}, {&str_pre_run_hooks, "pre_run_hooks"}, {&str_enter_hook, "launch_enter_hook"},
        {&str_exit_hook, "launch_exit_hook"}, {&str_used_global_vals, "used_global_vals"},
        {&str_launches, "launches"}, {&str_meta, "meta"}, {&str_run, "run"}, {&str_grid, "grid"},
        {&str_warmup, "warmup"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!(*names[i].slot = PyUnicode_InternFromString(names[i].text))) return NULL;
    if (!(int_one = PyLong_FromLong(1))) return NULL;
    for (long i = 0; i < 128; i++)
        if (!(small_ints[i] = PyLong_FromLong(i))) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&AllocTableType);
    Py_INCREF(&LauncherType);
    Py_INCREF(&DispatchType);
    Py_INCREF(&DirectType);
    if (PyModule_AddObject(m, "AllocTable", (PyObject *)&AllocTableType) < 0 ||
        PyModule_AddObject(m, "Launcher", (PyObject *)&LauncherType) < 0 ||
        PyModule_AddObject(m, "Dispatch", (PyObject *)&DispatchType) < 0 ||
        PyModule_AddObject(m, "Direct", (PyObject *)&DirectType) < 0 || PyModule_AddIntConstant(m, "ABI", 3) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
