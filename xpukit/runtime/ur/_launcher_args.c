/* _launcher_args.c (part of _xpukit_launcher): one argument converted by its kind and checked
 * (a pointer must lie in a live allocation of the session's AllocTable); the address of the kit's
 * own memory read from the instance; what every launch does first (launch_prepare: all of them
 * converted and checked, a bad one reported through arg_error). See _launcher.c.
 */
#include "_launcher_internal.h"
#include <math.h>

PyTypeObject *usm_type, *device_array_type;
Py_ssize_t alloc_offset, dtype_offset;
PyObject *launcher_names[N_LAUNCHER_READS];


/* A slot of an instance of exactly the registered type: a new reference, or NULL (unset) with no error. */
static PyObject *slot_value(PyObject *o, Py_ssize_t offset) {
    PyObject *v = *(PyObject **)((char *)o + offset);
    return v ? Py_NewRef(v) : NULL;
}

/* the attribute site of the launch path (ALLOCATION_HANDLE): read from the instance dict, made
 * if need be (an allocation's attributes are rarely read from Python; this, on every launch) */
static attr_site site_usm_handle = {.make_dict = 1};

/* o's ARRAY_DTYPE, or NULL with no error when it has none (looked up without raising). */
PyObject *dtype_of(PyObject *o) {
    if (dtype_offset && device_array_type && Py_TYPE(o) == device_array_type) return slot_value(o, dtype_offset);
    PyObject *v = NULL;
    if (lookup_attr(o, launcher_names[READ_ARRAY_DTYPE], &v) < 0) PyErr_Clear();
    return v;
}

/* o's ADDRESS attribute (.ptr): 1 and a new reference, 0 (no error) when o has none, -1 with the
 * error its lookup raised. An absent attribute creates no exception (an object that is no memory
 * of the kit's and carries no address comes this way, and is refused by name). */
int lookup_address(PyObject *o, PyObject **out) {
    return lookup_attr(o, launcher_names[READ_ADDRESS], out);
}

/* 1: an address read (or not one of ours), 0: *out set, -1: closed (the callback says "freed"). */
int own_address(PyObject *o, uint64_t *out) {
    PyObject *alloc = NULL;
    if (device_array_type && Py_TYPE(o) == device_array_type) {
        alloc = alloc_offset ? slot_value(o, alloc_offset) : PyObject_GetAttr(o, launcher_names[READ_ARRAY_ALLOC]);
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
    PyObject *h = inst_attr(&site_usm_handle, o, launcher_names[READ_ALLOCATION_HANDLE]);
    Py_XDECREF(alloc);
    if (!h) {
        PyErr_Clear();
        return 1;
    }
    int rc = -1;
    if (PyLong_Check(h)) {
        if (read_u64(h, out) == 0) rc = 0;
        PyErr_Clear();
    }
    Py_DECREF(h);
    return rc;
}

/* A device address from an int or an object with an int .ptr. 0 ok, else an ARG_* code. */
static int get_address(PyObject *o, uint64_t *out) {
    if (o == Py_None) return ARG_NULL;
    if (PyLong_Check(o) && !PyBool_Check(o)) {
        if (read_u64(o, out)) return ARG_RANGE;
        return 0;
    }
    int own = own_address(o, out);
    if (own <= 0) return own == 0 ? 0 : ARG_TYPE;
    PyObject *p = NULL;
    int found = lookup_address(o, &p);
    if (found <= 0) {
        /* no address attribute (no exception made), or a closed allocation's, which raises: the callback tells which */
        PyErr_Clear();
        if (found < 0 || PyFloat_Check(o) || PyBool_Check(o)) return ARG_TYPE;
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

int check_live(Launcher *l, uint64_t addr) {
    if (addr == 0) return ARG_NULL;
    return table_find(l->table, addr) < 0 ? ARG_NOT_LIVE : 0;
}

/* o has an ADDRESS attribute (a lookup that makes no exception when it has none). */
static int has_address(PyObject *o) {
    PyObject *p = NULL;
    int r = lookup_address(o, &p);
    Py_XDECREF(p);
    if (r < 0) PyErr_Clear();
    return r > 0;
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
int convert(Launcher *l, char kind, PyObject *o, uint64_t *bits, size_t *size) {
    int rc;
    double d;
    *bits = 0;
    switch (kind) {
    case 'P': /* typed pointer */
    case 'A': /* an integer parameter the kernel turns into a pointer */
        *size = 8;
        if ((rc = get_address(o, bits))) return rc;
        return check_live(l, *bits);
    case 'q':
    case 'Q':
        *size = 8;
        if (!PyLong_Check(o) && !PyFloat_Check(o) &&
            (Py_TYPE(o) == usm_type || Py_TYPE(o) == device_array_type || has_address(o))) {
            /* an allocation handed to a 64-bit integer: an address, so checked like one */
            if ((rc = get_address(o, bits))) return rc;
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
int convert_pre(Launcher *l, char kind, const pre_t *p, uint64_t *bits, size_t *size) {
    long long v = (long long)p->v;
    switch (p->tag) {
    case PRE_ADDR: /* what get_address() reads (xpukit's memory, or an int .ptr) for 'P', 'A' and memory passed to 'q'/'Q' */
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

int get_grid(PyObject *o, size_t *out) {
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

/* Report a bad argument through the Python callback (which raises); always returns NULL. */
PyObject *arg_error(Launcher *l, Py_ssize_t index, int code, PyObject *value) {
    if (PyErr_Occurred()) PyErr_Clear();
    if (!l->on_arg_error) return PyErr_Format(PyExc_RuntimeError, "xpukit: launch after release");
    PyObject *r = PyObject_CallFunction(l->on_arg_error, "niO", index, code, value ? value : Py_None);
    Py_XDECREF(r);
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "xpukit: bad kernel argument");
    return NULL;
}

/* What every launch does first, after the caller has checked that the kernel is open and read its
 * grid: the count, every argument converted and checked into vals/sizes (nothing touched on a bad
 * one). 0: launch, 1: an empty grid (launch nothing), -1: an error is set.
 * items: n borrowed arguments, kept alive by the caller; pre: what the caller read from each (or
 * NULL); checked_generation: the table's generation before anything was read from the arguments
 * (the caller's reads count: a free since then re-checks every address). */
int launch_prepare(Launcher *l, const size_t *g, PyObject *const *items, Py_ssize_t n, const pre_t *pre,
                   uint64_t checked_generation, uint64_t *vals, size_t *sizes) {
    if (l->on_grow) { /* more programs than ever: the callback grows the per-program scratch first */
        uint64_t programs;
        if (__builtin_mul_overflow((uint64_t)g[0], (uint64_t)g[1], &programs) ||
            __builtin_mul_overflow(programs, (uint64_t)g[2], &programs))
            programs = UINT64_MAX;
        if (programs > l->grown) {
            PyObject *r = PyObject_CallFunction(l->on_grow, "K", (unsigned long long)programs);
            if (!r) return -1;
            Py_DECREF(r);
            if (programs > l->grown) l->grown = programs;
        }
    }
    if (n != l->nparams) {
        arg_error(l, n, ARG_COUNT, Py_None);
        return -1;
    }
    /* 1: convert and check everything; nothing is touched on a bad argument */
    for (Py_ssize_t i = 0; i < n; i++) {
        int rc = pre && pre[i].tag ? convert_pre(l, l->kinds[i], &pre[i], &vals[i], &sizes[i]) : -1;
        if (rc) /* not covered, or bad: convert() gives the code the launch has always given */
            rc = convert(l, l->kinds[i], items[i], &vals[i], &sizes[i]);
        if (rc) {
            PyObject *bad = items[i];
            Py_INCREF(bad);
            arg_error(l, i, rc, bad);
            Py_DECREF(bad);
            return -1;
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
                arg_error(l, i, ARG_NOT_LIVE, bad);
                Py_DECREF(bad);
                return -1;
            }
        }
    }
    return g[0] == 0 || g[1] == 0 || g[2] == 0; /* an empty grid launches nothing */
}
