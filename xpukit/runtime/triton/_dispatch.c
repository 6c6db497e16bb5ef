/* _xpukit_dispatch: Triton's launch path in C, built on the UR launcher (_xpukit_launcher).
 *
 * fast_key: a specialization key at least as fine as Triton's; Dispatch: kernel[grid](...) for a
 * call seen before, in one C call; Direct: BoundKernel.launch for its common call. Each has a
 * Python twin (xpukit/runtime/triton/fast_table.py, xpukit/runtime/triton/launch.py) with the same
 * behaviour; the tests run both. Everything UR (the argument checks, the allocation table, the
 * enqueue) is the launcher's, reached through its capsule (_launcher.h), never copied here.
 */
#include "_launcher.h"

/* the launcher's functions and types, from its capsule at import */
static const xpukit_ur_api *ur;

/* the attribute sites of the dispatch path */
static attr_site site_queue_handle, site_queue_closed, site_stream_queue, site_closed, site_events, site_hooks,
    site_globals;
static PyObject *str_handle, *str_ptr;

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
    int own = ur->own_address(o, addr);
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
            PyObject *dtype = ur->dtype_of(o);
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
            PyObject *dtype = ur->dtype_of(o);
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
    if (!PyCFunction_Check(f) || PyCFunction_GET_FUNCTION(f) != ur->launcher_launch)
        return NULL;
    PyObject *self = PyCFunction_GET_SELF(f);
    return self && Py_TYPE(self) == ur->launcher_type ? (Launcher *)self : NULL;
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
    if (!alloc || !PyObject_TypeCheck(alloc, ur->alloc_table_type)) {
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
                if (ur->get_grid(gi, &gs[i])) {
                    Py_INCREF(gi);
                    Py_DECREF(queue);
                    Py_DECREF(gseq);
                    Py_DECREF(hit);
                    ur->arg_error(lf, -1, ARG_GRID, gi);
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
            r = ur->launch_core(lf, qh, gs, items, m, 0, pl, generation);
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
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_xpukit_dispatch.Dispatch",
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
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_xpukit_dispatch.GridCall",
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
        return ur->arg_error(l, -1, ARG_CLOSED, Py_None);
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
        if (ur->get_grid(gi, &g[i])) return ur->arg_error(l, -1, ARG_GRID, gi);
    }
    /* args stay alive for the call (the caller's), and a vectorcall's array does not move */
    return ur->launch_core(l, queue, g, args + 1, nargs - 1, 0, NULL, l->table->generation);
}

static PyObject *direct_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *launcher, *queue, *fallback;
    if (kw && PyDict_GET_SIZE(kw)) return PyErr_Format(PyExc_TypeError, "Direct takes positional arguments only");
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

static PyTypeObject DirectType = {
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


static PyMethodDef module_methods[] = {
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
    struct {
        PyObject **slot;
        const char *text;
    } names[] = {
        {&str_handle, "_handle"}, {&str_ptr, "ptr"},
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
    Py_INCREF(&DispatchType);
    Py_INCREF(&DirectType);
    if (PyModule_AddObject(m, "Dispatch", (PyObject *)&DispatchType) < 0 ||
        PyModule_AddObject(m, "Direct", (PyObject *)&DirectType) < 0 || PyModule_AddIntConstant(m, "ABI", 1) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
