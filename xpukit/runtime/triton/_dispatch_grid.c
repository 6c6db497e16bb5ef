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
#define MEMO 4

typedef struct {
    PyObject_HEAD
    PyObject *fn, *hits, *modes, *current, *ck;
    /* the last activation seen, and what the call reads from it (refreshed when it changes) */
    PyObject *act, *session, *stream, *table_key, *stats, *alloc;
    /* the last MEMO keys that hit, their table keys and entries, the latest first: a call is
     * matched against them without building a key (a call whose n alternates between two
     * specializations hits too); forget() (called when the table records) drops them */
    PyObject *memo_key[MEMO], *memo_table_key[MEMO], *memo_hit[MEMO];
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
    for (int j = 0; j < MEMO; j++) {
        Py_VISIT(d->memo_key[j]);
        Py_VISIT(d->memo_table_key[j]);
        Py_VISIT(d->memo_hit[j]);
    }
    Py_VISIT(d->last_call);
    return 0;
}

/* The memo emptied at once, then its references let go (which may run Python code). */
static void memo_clear(Dispatch *d) {
    PyObject *held[3 * MEMO];
    for (int j = 0; j < MEMO; j++) {
        held[3 * j] = d->memo_key[j], held[3 * j + 1] = d->memo_table_key[j], held[3 * j + 2] = d->memo_hit[j];
        d->memo_key[j] = d->memo_table_key[j] = d->memo_hit[j] = NULL;
    }
    for (int j = 0; j < 3 * MEMO; j++) Py_XDECREF(held[j]);
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
    memo_clear(d);
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

/* One kernel[grid](...) call on its way through the steps below. Each step answers STEP_OK (go on),
 * STEP_DOOR (the Python door takes the call), STEP_ERROR (an error is set) or, for the launch in
 * C, STEP_BY_CALL (not covered there: the recorded submit is called instead). What a step takes
 * it holds in the call, and call_release() lets it all go, once, whatever the outcome. */
enum { STEP_ERROR = -1, STEP_DOOR = 0, STEP_OK = 1, STEP_BY_CALL = 2 };

typedef struct {
    Dispatch *d;
    GridCall *g;
    PyObject *args, *kwargs; /* the call's arguments (borrowed) */
    /* owned: the activation record, the recorded hit, the grid as a tuple, the queue's handle */
    PyObject *act, *hit, *gseq, *queue;
    /* borrowed from act, never re-read from d: Python code run below (a .ptr property, a grid
     * function) may let another thread refresh d with its own activation; act keeps them alive */
    PyObject *session, *stream, *table_key, *stats;
    AllocTable *alloc;
    /* the table's generation before any argument is read: a free from then on makes the launch
     * check every address again */
    uint64_t generation;
    Py_ssize_t gn;
    pre_t *pre; /* what the key match read, handed to the launch (one pass over the arguments) */
    int have_pre;
} grid_call;

static void call_release(grid_call *c) {
    Py_XDECREF(c->queue);
    Py_XDECREF(c->gseq);
    Py_XDECREF(c->hit);
    Py_XDECREF(c->act);
}

/* The active session's record, read into d when it changed, and the states that send every call
 * through the door (a closed session, a benchmark's events, hooks, changed globals). */
static int call_activation(grid_call *c) {
    Dispatch *d = c->d;
    if (PyContextVar_Get(d->current, NULL, &c->act) < 0) return STEP_ERROR;
    if (!c->act || c->act == Py_None) return STEP_DOOR; /* no session: the door raises NoActiveSession */
    if (c->act != d->act && dispatch_refresh(d, c->act) < 0) return STEP_DOOR;
    /* a deallocation run by the refresh may have let another thread refresh d in between */
    if (c->act != d->act) return STEP_DOOR;
    c->session = d->session, c->stream = d->stream, c->table_key = d->table_key, c->stats = d->stats;
    c->alloc = (AllocTable *)d->alloc;
    if (truthy_attr(&site_closed, c->session, N(SESSION_CLOSED)) || not_none_attr(&site_events, c->stream, N(STREAM_EVENTS)) ||
        truthy_attr(&site_hooks, d->fn, N(JIT_PRE_RUN_HOOKS)) || class_attr_set(d->ck, N(HOOK_ENTER)) ||
        class_attr_set(d->ck, N(HOOK_EXIT)) || truthy_attr(&site_globals, d->fn, N(JIT_USED_GLOBALS)))
        return STEP_DOOR;
    c->generation = c->alloc->generation;
    return STEP_OK;
}

/* The memo's entry j moved to the front (the others keep their order): pointers only, no Python code. */
static void memo_promote(Dispatch *d, int j) {
    PyObject *k = d->memo_key[j], *t = d->memo_table_key[j], *h = d->memo_hit[j];
    for (; j > 0; j--) {
        d->memo_key[j] = d->memo_key[j - 1];
        d->memo_table_key[j] = d->memo_table_key[j - 1];
        d->memo_hit[j] = d->memo_hit[j - 1];
    }
    d->memo_key[0] = k, d->memo_table_key[0] = t, d->memo_hit[0] = h;
}

/* A new hit at the memo's front (the references taken), the oldest let go once the memo is whole. */
static void memo_push(Dispatch *d, PyObject *table_key, PyObject *key, PyObject *hit) {
    PyObject *k = d->memo_key[MEMO - 1], *t = d->memo_table_key[MEMO - 1], *h = d->memo_hit[MEMO - 1];
    d->memo_key[MEMO - 1] = key, d->memo_table_key[MEMO - 1] = table_key, d->memo_hit[MEMO - 1] = hit;
    memo_promote(d, MEMO - 1);
    Py_XDECREF(k); /* may run Python code: the memo is whole again by now */
    Py_XDECREF(t);
    Py_XDECREF(h);
}

/* A recent hit whose key the call matches (the values read kept in pre): 1, else 0. */
static int match_memo(grid_call *c) {
    Dispatch *d = c->d;
    for (int j = 0; j < MEMO; j++) {
        PyObject *key = d->memo_key[j], *hit = d->memo_hit[j];
        if (!key || !hit || d->memo_table_key[j] != c->table_key) continue;
        /* held: matching may run Python code (a .ptr property), and another thread may replace them */
        Py_INCREF(key);
        Py_INCREF(hit);
        int ok = key_matches(key, c->args, c->kwargs, d->modes, c->alloc, c->pre) && PyTuple_Check(hit) &&
                 PyTuple_GET_SIZE(hit) >= hit_len && HIT(hit, SESSION) == c->session;
        if (PyErr_Occurred()) PyErr_Clear();
        if (ok) {
            c->hit = hit;
            c->have_pre = 1;
            if (j && d->memo_key[j] == key && d->memo_hit[j] == hit) memo_promote(d, j);
            Py_DECREF(key);
            return 1;
        }
        Py_DECREF(hit);
        Py_DECREF(key);
    }
    return 0;
}

/* The call's key looked up in the table (and remembered at the memo's front when found). */
static int lookup_hit(grid_call *c) {
    Dispatch *d = c->d;
    PyObject *fk_args[4] = {c->args, c->kwargs ? c->kwargs : Py_None, d->modes, (PyObject *)c->alloc};
    PyObject *key = fast_key(NULL, fk_args, 4);
    if (!key) return STEP_ERROR;
    if (key == Py_None) {
        Py_DECREF(key);
        return STEP_DOOR;
    }
    PyObject *k2 = PyTuple_Pack(2, c->table_key, key);
    if (!k2) {
        Py_DECREF(key);
        return STEP_ERROR;
    }
    PyObject *hit = PyDict_GetItemWithError(d->hits, k2); /* borrowed */
    Py_DECREF(k2);
    if (!hit) {
        Py_DECREF(key);
        return PyErr_Occurred() ? STEP_ERROR : STEP_DOOR;
    }
    c->hit = Py_NewRef(hit);
    memo_push(d, Py_NewRef(c->table_key), key, Py_NewRef(hit));
    return STEP_OK;
}

/* The recorded entry for this call: a recent hit, else the table's; this session's, or the door
 * (an argument the key does not cover, any memory that is not the kit's among them, has no key). */
static int find_hit(grid_call *c) {
    if (!match_memo(c)) {
        int rc = lookup_hit(c);
        if (rc != STEP_OK) return rc;
    }
    PyObject *hit = c->hit;
    if (!PyTuple_Check(hit) || PyTuple_GET_SIZE(hit) < hit_len || HIT(hit, SESSION) != c->session)
        return STEP_DOOR; /* another session's: the Python door finds this one's */
    return STEP_OK;
}

/* The grid: a tuple/list of 1 to 3, or a callable of the launch's meta-parameters, as a tuple. */
static int read_grid(grid_call *c) {
    PyObject *grid = Py_NewRef(c->g->grid);
    if (!PyTuple_Check(grid) && !PyList_Check(grid) && PyCallable_Check(grid)) {
        PyObject *kw = c->kwargs ? Py_NewRef(c->kwargs) : PyDict_New();
        PyObject *meta = kw ? PyObject_CallMethodObjArgs(HIT(c->hit, ENTRY), N(ENTRY_META), c->args, kw, NULL) : NULL;
        Py_XDECREF(kw);
        PyObject *r = meta ? PyObject_CallOneArg(grid, meta) : NULL;
        Py_XDECREF(meta);
        Py_DECREF(grid);
        if (!r) return STEP_ERROR;
        grid = r;
    }
    c->gseq = (PyTuple_Check(grid) || PyList_Check(grid)) ? PySequence_Tuple(grid) : NULL;
    Py_DECREF(grid);
    c->gn = c->gseq ? PyTuple_GET_SIZE(c->gseq) : 0;
    if (c->gn < 1 || c->gn > 3) { /* the Python door names the bad grid */
        PyErr_Clear();
        return STEP_DOOR;
    }
    return STEP_OK;
}

/* The stream's queue handle; closed: the Python door raises the kit's error. */
static int read_queue(grid_call *c) {
    PyObject *q = inst_attr(&site_stream_queue, c->stream, N(STREAM_QUEUE));
    if (q) {
        c->queue = inst_attr(&site_queue_handle, q, N(QUEUE_HANDLE));
        Py_DECREF(q);
    }
    if (!c->queue || c->queue == Py_None) {
        PyErr_Clear();
        return STEP_DOOR;
    }
    return STEP_OK;
}

/* The recorded argument positions, read into d once per recorded entry (held, by identity): 1, or
 * 0 when they are not what a recorded key gives (the launcher's call names the problem). */
static int read_positions(Dispatch *d, PyObject *index) {
    if (!PyTuple_CheckExact(index) || PyTuple_GET_SIZE(index) > MAX_PARAMS) return 0;
    if (index == d->idx_owner) return 1;
    Py_ssize_t m = PyTuple_GET_SIZE(index), ix[MAX_PARAMS];
    for (Py_ssize_t j = 0; j < m; j++) {
        PyObject *o = PyTuple_GET_ITEM(index, j);
        ix[j] = PyLong_CheckExact(o) ? PyLong_AsSsize_t(o) : -1;
        if (ix[j] < 0) {
            PyErr_Clear();
            return 0;
        }
    }
    /* nothing runs between filling the array and naming its owner (ints only) */
    memcpy(d->idx, ix, m * sizeof ix[0]);
    d->idx_n = m;
    Py_INCREF(index);
    Py_XSETREF(d->idx_owner, index);
    return 1;
}

/* The launch from here, when the hit's submit is the kernel's own checked launcher (which grows
 * any scratch): from the values the match read, without a call, an argument tuple or a second
 * read. STEP_OK: *r is the launch's result. */
static int launch_in_c(grid_call *c, PyObject **r) {
    Launcher *lf = launcher_of(HIT(c->hit, SUBMIT));
    if (!lf || !lf->kernel || lf->table != c->alloc || !PyLong_CheckExact(c->queue)) return STEP_BY_CALL;
    void *qh = fnptr(c->queue);
    if (!qh) {
        PyErr_Clear();
        return STEP_BY_CALL;
    }
    size_t gs[3];
    if (grid_sizes(lf, c->gseq, c->gn, gs) < 0) return STEP_ERROR;
    PyObject *index = HIT(c->hit, POSITIONS);
    Py_ssize_t na = PyTuple_GET_SIZE(c->args), m = na;
    PyObject *const *items = &PyTuple_GET_ITEM(c->args, 0);
    const pre_t *pl = c->have_pre ? c->pre : NULL;
    PyObject *picked_items[MAX_PARAMS];
    pre_t picked_pre[MAX_PARAMS];
    if (index != Py_None) {
        if (!read_positions(c->d, index)) return STEP_BY_CALL;
        m = PyTuple_GET_SIZE(index);
        for (Py_ssize_t j = 0; j < m; j++) {
            Py_ssize_t i = c->d->idx[j];
            if (i >= na) return STEP_BY_CALL; /* cannot happen for a recorded key; the call names it */
            picked_items[j] = PyTuple_GET_ITEM(c->args, i);
            if (pl) picked_pre[j] = c->pre[i];
        }
        items = picked_items;
        if (pl) pl = picked_pre;
    }
    *r = ur->launch_core(lf, qh, gs, items, m, 0, pl, c->generation);
    return *r ? STEP_OK : STEP_ERROR;
}

/* The hit's submit called as submit(queue, gx, gy, gz, picked arguments): what launch_in_c does not
 * cover. */
static int launch_by_call(grid_call *c, PyObject **r) {
    PyObject *index = HIT(c->hit, POSITIONS), *picked;
    if (index == Py_None) {
        picked = Py_NewRef(c->args);
    } else {
        Py_ssize_t m = PyTuple_GET_SIZE(index), na = PyTuple_GET_SIZE(c->args);
        picked = PyTuple_New(m);
        for (Py_ssize_t j = 0; picked && j < m; j++) {
            Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(index, j));
            if (i < 0 || i >= na) { /* cannot happen for a recorded key; be safe */
                Py_CLEAR(picked);
                PyErr_SetString(PyExc_IndexError, "xpukit: argument index out of range");
                break;
            }
            PyTuple_SET_ITEM(picked, j, Py_NewRef(PyTuple_GET_ITEM(c->args, i)));
        }
    }
    if (!picked) return STEP_ERROR;
    PyObject *call[5] = {c->queue, grid_dim(c->gseq, c->gn, 0), grid_dim(c->gseq, c->gn, 1), grid_dim(c->gseq, c->gn, 2),
                         picked};
    *r = PyObject_Vectorcall(HIT(c->hit, SUBMIT), call, 5, NULL);
    Py_DECREF(picked);
    return *r ? STEP_OK : STEP_ERROR;
}

/* Every step up to the launch, then the launch count: STEP_OK once launched. */
static int call_steps(grid_call *c) {
    int rc = call_activation(c);
    if (rc == STEP_OK) rc = find_hit(c);
    if (rc == STEP_OK) rc = read_grid(c);
    if (rc == STEP_OK) rc = read_queue(c);
    if (rc != STEP_OK) return rc;
    PyObject *r = NULL;
    rc = launch_in_c(c, &r);
    if (rc == STEP_BY_CALL) rc = launch_by_call(c, &r);
    if (rc != STEP_OK) return rc;
    Py_DECREF(r); /* an event handle only when asked for: None here */
    /* driver.stats.launches += 1 */
    return bump_counter(c->stats, N(STATS_LAUNCHES)) < 0 ? STEP_ERROR : STEP_OK;
}

static PyObject *gridcall_call(GridCall *g, PyObject *args, PyObject *kwargs) {
    pre_t pre[MAX_PARAMS];
    grid_call c = {.d = g->d, .g = g, .args = args, .kwargs = kwargs, .pre = pre};
    int rc = call_steps(&c);
    PyObject *kernel = rc == STEP_OK ? Py_NewRef(HIT(c.hit, KERNEL)) : NULL;
    call_release(&c);
    if (rc == STEP_DOOR) return dispatch_fallback(g->d, g->grid, args, kwargs);
    return kernel;
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
    memo_clear(d);
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
