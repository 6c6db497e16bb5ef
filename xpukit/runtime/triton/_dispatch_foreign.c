/* _dispatch_foreign.c (part of _xpukit_dispatch): kernel[grid] on dpnp/dpctl arrays in C, for a
 * session opened over dpnp's SYCL queue (xpukit/runtime/ur/interop/state.py holds the per-array
 * state; docs/ur.md, "dpnp and foreign memory"). Each array already checked through UR and lent to
 * the session (its lease, held while it lives) is replaced by its typed pointer, and the launch is
 * submitted to SYCL on the session's in-order SYCL queue (_launcher_sycl.c), which orders it after
 * and before SYCL's own work; the call's arguments are kept until SYCL has run it. Anything else (an
 * array seen for the first time, one of another queue, DLPack and other producers, a kernel SYCL
 * cannot build) takes the Python door, which checks, lends and orders it there.
 */
#include "_dispatch.h"

static attr_site site_foreign, site_fast, site_kinds, site_held, site_held_version, site_sycl_pointer, site_wrapped,
    site_inflight;

/* The session's foreign state when its C path is on (a new reference), else NULL (no error). */
PyObject *foreign_state(PyObject *session) {
    PyObject *f = inst_attr(&site_foreign, session, N(SESSION_FOREIGN));
    if (!f) {
        PyErr_Clear();
        return NULL;
    }
    if (f == Py_None || !truthy_attr(&site_fast, f, N(FOREIGN_FAST))) {
        Py_DECREF(f);
        return NULL;
    }
    return f;
}

void held_memo_clear(held_memo *m) {
    /* taken out first, released after: a release may run Python code that launches again */
    PyObject *state = m->state, *refs[HELD_MEMO_SLOTS], *ptrs[HELD_MEMO_SLOTS];
    memcpy(refs, m->ref, sizeof refs);
    memcpy(ptrs, m->ptr, sizeof ptrs);
    memset(m, 0, sizeof *m);
    Py_XDECREF(state);
    for (int i = 0; i < HELD_MEMO_SLOTS; i++) {
        Py_XDECREF(refs[i]);
        Py_XDECREF(ptrs[i]);
    }
}

int held_memo_traverse(held_memo *m, visitproc visit, void *arg) {
    Py_VISIT(m->state);
    for (int i = 0; i < HELD_MEMO_SLOTS; i++) {
        Py_VISIT(m->ref[i]);
        Py_VISIT(m->ptr[i]);
    }
    return 0;
}

/* The foreign state's held_version (-1, no error, when it is not an int). Read after any Python
 * code a launch ran (a dpnp array's read may collect another array and change the table). */
static long held_version(PyObject *fstate) {
    PyObject *v = inst_attr(&site_held_version, fstate, N(FOREIGN_HELD_VERSION));
    long r = v && PyLong_CheckExact(v) ? PyLong_AsLong(v) : -1;
    Py_XDECREF(v);
    if (r < 0) PyErr_Clear();
    return r;
}

/* u's pointer for position i from the memo (a new reference), else NULL: valid while fstate is the
 * memo's, its held table unchanged since the entry was read, and u the array the entry's weak
 * reference names (alive: its held entry is still there, under the same version). */
static PyObject *memo_pointer(held_memo *m, PyObject *fstate, Py_ssize_t i, PyObject *u, long version) {
    if (i >= HELD_MEMO_SLOTS || m->state != fstate || version < 0 || !m->ref[i] || m->version[i] != version ||
        PyWeakref_GET_OBJECT(m->ref[i]) != u)
        return NULL;
    return Py_NewRef(m->ptr[i]);
}

/* u's held lease's pointer for position i (a new reference; None: of another queue), read from the
 * held table and kept in the memo; NULL (no error) when u is not held yet. */
static PyObject *held_pointer(held_memo *m, PyObject *fstate, PyObject **held, Py_ssize_t i, PyObject *u,
                              long version) {
    if (!*held && !(*held = inst_attr(&site_held, fstate, N(FOREIGN_HELD)))) return NULL;
    if (!PyDict_Check(*held)) return NULL;
    PyObject *id = PyLong_FromVoidPtr(u);
    PyObject *h = id ? PyDict_GetItemWithError(*held, id) : NULL; /* borrowed: (weak reference, lease) */
    Py_XDECREF(id);
    if (!h || !PyTuple_CheckExact(h) || PyTuple_GET_SIZE(h) != 2 || !PyWeakref_Check(PyTuple_GET_ITEM(h, 0)) ||
        PyWeakref_GET_OBJECT(PyTuple_GET_ITEM(h, 0)) != u)
        return NULL;
    PyObject *ref = Py_NewRef(PyTuple_GET_ITEM(h, 0)), *lease = Py_NewRef(PyTuple_GET_ITEM(h, 1));
    PyObject *p = inst_attr(&site_sycl_pointer, lease, N(LEASE_SYCL_POINTER));
    Py_DECREF(lease);
    if (p && p != Py_None && i < HELD_MEMO_SLOTS && version >= 0) {
        if (m->state != fstate) held_memo_clear(m); /* another session's entries */
        /* kept only if the table is still as read (a release above may have run Python code), with
         * every field of the entry set before the old ones are released */
        if (held_version(fstate) == version && (!m->state || m->state == fstate)) {
            PyObject *old_ref = m->ref[i], *old_ptr = m->ptr[i];
            if (!m->state) m->state = Py_NewRef(fstate);
            m->version[i] = version;
            m->ref[i] = Py_NewRef(ref);
            m->ptr[i] = Py_NewRef(p);
            Py_XDECREF(old_ref);
            Py_XDECREF(old_ptr);
        }
    }
    Py_DECREF(ref);
    return p;
}

/* args with each held dpnp/dpctl array replaced by its lease's pointer: 1 and a new tuple in *out;
 * 0: no foreign array among them; 2: the Python door: an array not held yet, of another queue, or
 * another producer, or any other object beside them (the kit's own memory among dpnp arrays is
 * launched by the door, which orders it: a launch SYCL holds back behind a host task must not be
 * overtaken by a later UR launch on that memory); -1: an error. A repeated launch on the same
 * arrays reads their pointers from the kernel's memo instead of the held table. */
int foreign_substitute(PyObject *fstate, PyObject *args, held_memo *memo, PyObject **out) {
    *out = NULL;
    PyObject *kinds = inst_attr(&site_kinds, fstate, N(FOREIGN_KINDS)), *held = NULL;
    if (!kinds || !PyDict_Check(kinds)) {
        Py_XDECREF(kinds);
        PyErr_Clear();
        return 2;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    int foreign = 0, door = 0, rc = 0;
    for (Py_ssize_t i = 0; i < n && rc == 0; i++) {
        PyObject *o = PyTuple_GET_ITEM(args, i);
        if (PyLong_CheckExact(o) || PyFloat_CheckExact(o) || PyBool_Check(o) || o == Py_None) continue;
        PyObject *k = PyDict_GetItemWithError(kinds, (PyObject *)Py_TYPE(o)); /* borrowed; absent: not foreign */
        long kind = k && PyLong_CheckExact(k) ? PyLong_AsLong(k) : 0;
        if (kind != 1 && kind != 2) {
            if (PyErr_Occurred()) rc = -1;
            foreign |= kind == 3;
            door = 1; /* the door's, if any foreign array is here */
            continue;
        }
        foreign = 1;
        if (door) continue;
        PyObject *u = kind == 2 ? inst_attr(&site_wrapped, o, N(WRAPPED_ARRAY)) : Py_NewRef(o);
        long version = u ? held_version(fstate) : -1;
        PyObject *p = u ? memo_pointer(memo, fstate, i, u, version) : NULL;
        if (!p && u) p = held_pointer(memo, fstate, &held, i, u, version);
        Py_XDECREF(u);
        if (!p || p == Py_None) { /* not held yet, or of another queue: the Python door leases and orders it */
            Py_XDECREF(p);
            PyErr_Clear();
            door = 1;
            continue;
        }
        if (!*out) { /* a new tuple (PyTuple_GetSlice of a whole tuple returns the tuple itself) */
            if (!(*out = PyTuple_New(n))) {
                Py_DECREF(p);
                rc = -1;
                break;
            }
            for (Py_ssize_t j = 0; j < n; j++) PyTuple_SET_ITEM(*out, j, Py_NewRef(PyTuple_GET_ITEM(args, j)));
        }
        PyObject *old = PyTuple_GET_ITEM(*out, i);
        PyTuple_SET_ITEM(*out, i, p); /* the new tuple is ours alone */
        Py_DECREF(old);
    }
    Py_DECREF(kinds);
    Py_XDECREF(held);
    if (rc == 0) rc = !foreign ? 0 : door ? 2 : 1;
    if (rc != 1) Py_CLEAR(*out);
    return rc;
}

/* lf's SYCL kernel, made by entry.sycl_attach(session, lf) when missing: 1 ready, 0 none (the
 * Python door), -1 an error. */
int foreign_ready(PyObject *session, Launcher *lf, PyObject *entry) {
    if (lf->sycl_kernel) return 1;
    PyObject *r = PyObject_CallMethodObjArgs(entry, N(ENTRY_SYCL_ATTACH), session, (PyObject *)lf, NULL);
    if (!r) return -1;
    int ok = PyObject_IsTrue(r);
    Py_DECREF(r);
    return ok < 0 ? -1 : ok && lf->sycl_kernel != NULL;
}

/* After a launch submitted to SYCL: the call's arguments held until SYCL has run it (the foreign
 * state's in-flight list, let go by settle(), asked at every 32nd launch held; the list counts the
 * launch too). */
int foreign_launched(PyObject *fstate, PyObject *args) {
    PyObject *inflight = inst_attr(&site_inflight, fstate, N(FOREIGN_INFLIGHT));
    if (!inflight) return -1;
    int rc = PyList_Check(inflight) ? PyList_Append(inflight, args) : -1;
    Py_ssize_t held = rc == 0 ? PyList_GET_SIZE(inflight) : 0;
    Py_DECREF(inflight);
    if (rc < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "xpukit: the foreign state's in-flight list is not a list");
        return -1;
    }
    if (held % 32 == 0) { /* every 32nd held launch, not every one after: SYCL may not yet say empty */
        PyObject *r = PyObject_CallMethodObjArgs(fstate, N(FOREIGN_SETTLE), Py_False, NULL);
        if (!r) return -1;
        Py_DECREF(r);
    }
    return 0;
}
