/* _dispatch_key.c (part of _xpukit_dispatch): fast_key, a specialization key at least as fine as
 * Triton's, and key_matches, the same comparison against a recorded key without building one.
 */
#include "_dispatch.h"

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
 * pre (or NULL): the address, as the launch's get_address() reads it (so it is read once): xpukit's
 * own memory, or the int .ptr of an object that is not a number (an int subclass is its value). */
static int memory_key_addr(PyObject *o, uint64_t *addr, pre_t *pre) {
    int own = ur->own_address(o, addr);
    if (own < 0) return 0; /* closed: Triton's path reports it */
    if (own > 0) {
        PyObject *p = NULL;
        if (ur->lookup_address(o, &p) <= 0) { /* no .ptr: no exception made (no key: the door takes it) */
            PyErr_Clear();
            return 0;
        }
        int bad = !PyLong_Check(p) || read_u64(p, addr);
        Py_DECREF(p);
        if (bad) {
            PyErr_Clear();
            return 0;
        }
        if (PyLong_Check(o) || PyFloat_Check(o)) return 1; /* the launch converts the number itself */
    }
    if (pre) {
        pre->tag = PRE_ADDR;
        pre->v = *addr;
    }
    return 1;
}

/* One positional argument's element of fast_key's key (a new reference), or NULL: with no error
 * when the key does not cover the argument, else with the error. */
static PyObject *arg_key(PyObject *o, char mode, AllocTable *table) {
    PyTypeObject *t = Py_TYPE(o);
    if (mode == 'c') {
        if (PyObject_Hash(o) == -1) {
            PyErr_Clear();
            return NULL;
        }
        return PyTuple_Pack(2, (PyObject *)t, o);
    }
    if (t == &PyLong_Type) return PyLong_FromLong(int_key_code(o, mode, table, NULL));
    if (t == &PyFloat_Type) return PyLong_FromLong(16);
    if (t == &PyBool_Type) return PyLong_FromLong(17);
    if (o == Py_None) return PyLong_FromLong(18);
    /* device memory: an object with an int .ptr (USMAllocation, DeviceArray) */
    uint64_t addr;
    if (!memory_key_addr(o, &addr, NULL)) return NULL;
    int div16 = mode == 's' ? (addr % 16 == 0) : 0;
    PyObject *dtype = ur->dtype_of(o);
    if (!dtype) /* untyped memory: specialized like an address (i64, u64 above 2**63) */
        return PyLong_FromLong(32 | ((addr >= 0x8000000000000000ULL) << 1) | (div16 << 3));
    PyObject *flag = PyLong_FromLong(64 | (div16 << 3));
    PyObject *k = flag ? PyTuple_Pack(3, (PyObject *)t, dtype, flag) : NULL;
    Py_XDECREF(flag);
    Py_DECREF(dtype);
    if (k && PyObject_Hash(k) == -1) {
        PyErr_Clear();
        Py_CLEAR(k);
    }
    return k;
}

/* fast_key(args, kwargs, modes, table) -> tuple | None
 * A key at least as fine as Triton 3.3's specialization of these arguments: equal keys mean
 * Triton would pick the same compiled kernel. modes: one letter per positional parameter:
 * 'c' constexpr (the value and its type), 's' specialized, 'v' do_not_specialize,
 * 'a' do_not_specialize_on_alignment. None: an argument this key does not cover (the caller
 * takes Triton's own path). */
PyObject *fast_key(PyObject *self, PyObject *const *a, Py_ssize_t nargs) {
    (void)self;
    if (!N(ACTIVE_SESSION))
        return PyErr_Format(PyExc_RuntimeError, "_xpukit_dispatch.bind() has not been called (xpukit.runtime.triton.dispatch calls it)");
    if (nargs != 4 || !PyTuple_Check(a[0]) || !PyBytes_Check(a[2]) ||
        !PyObject_TypeCheck(a[3], ur->alloc_table_type))
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
        PyObject *k = arg_key(PyTuple_GET_ITEM(args, i), modes[i], table);
        if (!k) {
            Py_DECREF(key);
            if (PyErr_Occurred()) return NULL;
            Py_RETURN_NONE; /* not covered */
        }
        PyTuple_SET_ITEM(key, i, k);
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

/* pre (or NULL): one per positional argument, what the match read (zeroed first; see pre_t).
 * Memory arguments are compared last: a call whose n changed its specialization (n % 16, n == 1)
 * fails on the number, before any address (a .ptr may be Python code) is read, so trying a few
 * recorded keys costs little (the Dispatch keeps its last hits). */
int key_matches(PyObject *key, PyObject *args, PyObject *kwargs, PyObject *modes_bytes, AllocTable *table,
                       pre_t *pre) {
    const char *modes = PyBytes_AS_STRING(modes_bytes);
    Py_ssize_t n = PyTuple_GET_SIZE(args), nkw = kwargs ? PyDict_GET_SIZE(kwargs) : 0;
    if (n > PyBytes_GET_SIZE(modes_bytes) || PyTuple_GET_SIZE(key) != n + 3 * nkw || n > MAX_PARAMS) return 0;
    if (pre) memset(pre, 0, n * sizeof *pre);
    unsigned short memory[MAX_PARAMS]; /* the memory arguments' positions */
    Py_ssize_t nmemory = 0;
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
        } else if (PyTuple_CheckExact(k) ? PyTuple_GET_SIZE(k) == 3 && PyTuple_GET_ITEM(k, 0) == (PyObject *)t
                                         : PyLong_CheckExact(k)) {
            memory[nmemory++] = i; /* typed memory's element names its type, untyped memory's is a number */
        } else {
            return 0;
        }
    }
    for (Py_ssize_t m = 0; m < nmemory; m++) {
        Py_ssize_t i = memory[m];
        PyObject *o = PyTuple_GET_ITEM(args, i), *k = PyTuple_GET_ITEM(key, i);
        uint64_t addr;
        if (!memory_key_addr(o, &addr, pre ? &pre[i] : NULL)) return 0;
        int div16 = modes[i] == 's' ? (addr % 16 == 0) : 0;
        PyObject *dtype = ur->dtype_of(o);
        if (!dtype) {
            if (!long_is(k, 32 | ((addr >= 0x8000000000000000ULL) << 1) | (div16 << 3))) return 0;
            continue;
        }
        int ok = PyTuple_CheckExact(k) && PyTuple_GET_SIZE(k) == 3 && PyTuple_GET_ITEM(k, 0) == (PyObject *)Py_TYPE(o) &&
                 long_is(PyTuple_GET_ITEM(k, 2), 64 | (div16 << 3)) && same_value(PyTuple_GET_ITEM(k, 1), dtype);
        Py_DECREF(dtype);
        if (!ok) return 0;
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
Launcher *launcher_of(PyObject *f) {
    if (!PyCFunction_Check(f) || PyCFunction_GET_FUNCTION(f) != ur->launcher_launch)
        return NULL;
    PyObject *self = PyCFunction_GET_SELF(f);
    return self && Py_TYPE(self) == ur->launcher_type ? (Launcher *)self : NULL;
}
