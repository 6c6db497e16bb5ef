/* _dispatch_grid.c (part of _xpukit_dispatch): kernel[grid](...) for a call seen before, in one C
 * call (Dispatch, and GridCall, what kernel[grid] returns).
 */
#include "_dispatch.h"

/* kernel[grid](*args, **kwargs) for a call seen before, in one C call: the same steps as the
 * compiled-launch table's Python door (xpukit/runtime/triton/fast_table.py, PyDispatch), which
 * this must match; every case it does not cover is handed to that door (fallback(fn) gives
 * Triton's ``run``, as the kit wrapped it), so both refuse and launch the same things.
 *
 * Dispatch(fn, hits, modes, current, compiled_kernel): one per JITFunction. hits: the table's
 * dict (table_key, fast_key) -> Hit (xpukit/runtime/triton/seam.py, whose field positions bind()
 * hands over), filled by the Python door when Triton's own run has compiled and launched; current: the ContextVar of the active
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

/* the attribute sites of kernel[grid] */
static attr_site site_queue_handle, site_stream_queue, site_closed, site_events, site_hooks, site_globals;

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
    if (!N(ACTIVE_SESSION)) {
        PyErr_SetString(PyExc_RuntimeError, "_xpukit_dispatch.bind() has not been called (xpukit.runtime.triton.dispatch calls it)");
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
int truthy_attr(attr_site *site, PyObject *o, PyObject *name) {
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
int bump_counter(PyObject *o, PyObject *name) {
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
    PyObject *session = PyObject_GetAttr(act, N(ACTIVE_SESSION));
    PyObject *stream = session ? PyObject_GetAttr(act, N(ACTIVE_STREAM)) : NULL;
    PyObject *table_key = stream ? PyObject_GetAttr(act, N(ACTIVE_TABLE_KEY)) : NULL;
    PyObject *driver = table_key ? PyObject_GetAttr(act, N(ACTIVE_DRIVER)) : NULL;
    PyObject *stats = driver ? PyObject_GetAttr(driver, N(DRIVER_STATS)) : NULL;
    PyObject *alloc = stats ? PyObject_GetAttr(session, N(SESSION_ALLOCATIONS)) : NULL;
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
    PyObject *run = PyObject_GetAttr(d->fn, N(JIT_RUN));
    if (!run) return NULL;
    PyObject *kw = kwargs ? PyDict_Copy(kwargs) : PyDict_New();
    PyObject *r = NULL;
    if (kw && PyDict_SetItem(kw, N(RUN_GRID), grid) == 0 && PyDict_SetItem(kw, N(RUN_WARMUP), Py_False) == 0)
        r = PyObject_Call(run, args, kw);
    Py_XDECREF(kw);
    Py_DECREF(run);
    return r;
}

static PyObject *gridcall_call(GridCall *g, PyObject *args, PyObject *kwargs) {
    Dispatch *d = g->d;
    PyObject *act = NULL;
    /* dpnp arrays: the call's own arguments (what the Python door gets, what a SYCL launch holds),
     * the session's foreign state and the arguments with pointers in the arrays' places (owned) */
    PyObject *const call_args = args;
    PyObject *fstate = NULL, *fargs = NULL;
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
    if (truthy_attr(&site_closed, session, N(SESSION_CLOSED)) || not_none_attr(&site_events, stream, N(STREAM_EVENTS)) ||
        truthy_attr(&site_hooks, d->fn, N(JIT_PRE_RUN_HOOKS)) || class_attr_set(d->ck, N(HOOK_ENTER)) ||
        class_attr_set(d->ck, N(HOOK_EXIT)) || truthy_attr(&site_globals, d->fn, N(JIT_USED_GLOBALS)))
        goto python_door;
    {
        PyObject *hit = NULL; /* owned */
        PyObject *last_key = d->last_key, *last_hit = d->last_hit;
        /* before any argument is read: a free from here on makes the launch check every address again */
        uint64_t generation = ((AllocTable *)alloc)->generation;
        pre_t pre[MAX_PARAMS]; /* what the key match read, handed to the launch (one pass over the arguments) */
        int have_pre = 0;
    match_last:
        if (last_key && last_hit && d->last_table_key == table_key) {
            /* held: matching may run Python code (a .ptr property), and another thread may replace them */
            Py_INCREF(last_key);
            Py_INCREF(last_hit);
            if (key_matches(last_key, args, kwargs, d->modes, (AllocTable *)alloc, pre) &&
                PyTuple_Check(last_hit) && PyTuple_GET_SIZE(last_hit) >= hit_len && HIT(last_hit, SESSION) == session) {
                hit = last_hit;
                have_pre = 1;
            } else {
                Py_DECREF(last_hit);
            }
            Py_DECREF(last_key);
            if (PyErr_Occurred()) PyErr_Clear();
        }
        if (!hit && !fstate && (fstate = foreign_state(session)) != NULL) {
            /* dpnp arrays held by the session: their pointers in their places, then match again */
            int fr = foreign_substitute(fstate, args, &fargs);
            if (fr < 0) goto error;
            if (fr == 2) goto python_door;
            if (fr == 1) {
                args = fargs;
                last_key = d->last_key, last_hit = d->last_hit;
                goto match_last;
            }
            Py_CLEAR(fstate); /* no dpnp array: the ordinary launch */
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
        if (!PyTuple_Check(hit) || PyTuple_GET_SIZE(hit) < hit_len || HIT(hit, SESSION) != session) {
            Py_DECREF(hit);
            goto python_door; /* another session's: the Python door finds this one's */
        }
        PyObject *submit = HIT(hit, SUBMIT), *index = HIT(hit, POSITIONS);
        PyObject *kernel = HIT(hit, KERNEL), *entry = HIT(hit, ENTRY);
        /* the grid: a tuple/list of 1 to 3, or a callable of the launch's meta-parameters */
        PyObject *grid = g->grid;
        Py_INCREF(grid);
        if (!PyTuple_Check(grid) && !PyList_Check(grid) && PyCallable_Check(grid)) {
            PyObject *kw = kwargs ? Py_NewRef(kwargs) : PyDict_New();
            PyObject *meta = kw ? PyObject_CallMethodObjArgs(entry, N(ENTRY_META), args, kw, NULL) : NULL;
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
        PyObject *q = inst_attr(&site_stream_queue, stream, N(STREAM_QUEUE));
        if (q) {
            queue = inst_attr(&site_queue_handle, q, N(QUEUE_HANDLE));
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
            /* submit is the kernel's own checked launcher (which grows any scratch): launch from here,
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
            if (fargs) { /* dpnp arrays: the launch submitted to SYCL on the session's in-order SYCL queue */
                int ready = foreign_ready(session, lf, entry);
                if (ready <= 0) {
                    Py_DECREF(queue);
                    Py_DECREF(gseq);
                    Py_DECREF(hit);
                    if (ready < 0) goto error;
                    goto python_door; /* no SYCL kernel: the door orders the UR launch itself */
                }
                r = ur->launch_sycl(lf, gs, items, m, pl, generation);
                if (r && foreign_launched(fstate, call_args) < 0) Py_CLEAR(r);
            } else {
                r = ur->launch_core(lf, qh, gs, items, m, 0, pl, generation);
            }
            goto launched;
        }
    vectorcall:;
        if (fargs) { /* dpnp arrays go to SYCL or through the door, never to UR behind SYCL's back */
            Py_DECREF(queue);
            Py_DECREF(gseq);
            Py_DECREF(hit);
            goto python_door;
        }
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
        if (bump_counter(stats, N(STATS_LAUNCHES)) < 0) {
            Py_DECREF(hit);
            goto error;
        }
        Py_INCREF(kernel);
        Py_DECREF(hit);
        Py_XDECREF(act);
        Py_XDECREF(fstate);
        Py_XDECREF(fargs);
        return kernel;
    }
python_door:
    Py_XDECREF(act);
    Py_XDECREF(fstate);
    Py_XDECREF(fargs);
    return dispatch_fallback(d, g->grid, call_args, kwargs);
error:
    Py_XDECREF(act);
    Py_XDECREF(fstate);
    Py_XDECREF(fargs);
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

PyTypeObject DispatchType = {
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

PyTypeObject GridCallType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_xpukit_dispatch.GridCall",
    .tp_basicsize = sizeof(GridCall),
    .tp_dealloc = (destructor)gridcall_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "kernel[grid]: call it with the kernel's arguments.",
    .tp_traverse = (traverseproc)gridcall_traverse,
    .tp_clear = (inquiry)gridcall_clear,
    .tp_call = (ternaryfunc)gridcall_call,
};
