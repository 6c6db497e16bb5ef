/* _dispatch.h: what the parts of _xpukit_dispatch share among themselves, top floor first (each
 * calls only the parts below it; tests/host/test_c_graph.py checks it): _dispatch.c: the module,
 * bind() and Direct; _dispatch_grid.c: Dispatch and GridCall (kernel[grid]); _dispatch_key.c:
 * fast_key and matching a call against a recorded key; _dispatch_shared.c: bind()'s names, the
 * launcher's API, the grid's padding, attribute helpers. Built together with -flto, so calls between the parts are inlined as if they were one
 * file. The launcher's C (argument checks, the allocation table, the enqueue) comes from its
 * capsule (_launcher.h), never copied here.
 */
#ifndef XPUKIT_TRITON_DISPATCH_H
#define XPUKIT_TRITON_DISPATCH_H

#include "_launcher.h"

/* What the dispatch reads from Python objects, by role: each role's attribute name (or, for a field
 * of a recorded Hit, its position) comes from xpukit/runtime/triton/seam.py through bind(); the C
 * holds no attribute name and no record layout of its own. */
#define XPUKIT_DISPATCH_READS(X)                                                                           \
    X(ACTIVE_SESSION) X(ACTIVE_STREAM) X(ACTIVE_TABLE_KEY) X(ACTIVE_DRIVER) X(DRIVER_STATS) X(STATS_LAUNCHES) \
    X(SESSION_ALLOCATIONS) X(SESSION_CLOSED) X(STREAM_EVENTS) X(STREAM_QUEUE) X(QUEUE_HANDLE) X(QUEUE_CLOSED)  \
    X(JIT_PRE_RUN_HOOKS) X(JIT_USED_GLOBALS) X(JIT_RUN) X(RUN_GRID) X(RUN_WARMUP) X(HOOK_ENTER) X(HOOK_EXIT)   \
    X(ENTRY_META)
#define XPUKIT_HIT_FIELDS(X) X(HIT_SESSION) X(HIT_SUBMIT) X(HIT_POSITIONS) X(HIT_KERNEL) X(HIT_ENTRY)

#define XPUKIT_ROLE_ENUM(r) READ_##r,
enum { XPUKIT_DISPATCH_READS(XPUKIT_ROLE_ENUM) N_DISPATCH_READS };
enum { XPUKIT_HIT_FIELDS(XPUKIT_ROLE_ENUM) N_HIT_FIELDS };
#undef XPUKIT_ROLE_ENUM

/* (these globals: _dispatch_shared.c) interned by bind(); NULL before it (Dispatch and Direct refuse to be made, fast_key to run, until then) */
extern PyObject *dispatch_names[N_DISPATCH_READS];
#define N(role) dispatch_names[READ_##role]
/* a Hit field's position, and the length a hit tuple must have to hold them all */
extern Py_ssize_t hit_pos[N_HIT_FIELDS];
extern Py_ssize_t hit_len;
#define HIT(hit, field) PyTuple_GET_ITEM(hit, hit_pos[READ_HIT_##field])

/* the launcher's functions and types, from its capsule at import */
extern const xpukit_ur_api *ur;
extern PyObject *small_ints[128]; /* CPython's cached ints 0..127: what PyLong_FromLong gives for a key code */
extern PyObject *int_one;
extern PyTypeObject DispatchType, GridCallType, DirectType;

/* _dispatch_key.c */
PyObject *fast_key(PyObject *self, PyObject *const *a, Py_ssize_t nargs);
int key_matches(PyObject *key, PyObject *args, PyObject *kwargs, PyObject *modes_bytes, AllocTable *table, pre_t *pre);
Launcher *launcher_of(PyObject *f);

/* _dispatch_shared.c */
PyObject *grid_dim(PyObject *grid, Py_ssize_t gn, int i);
int grid_sizes(Launcher *l, PyObject *grid, Py_ssize_t gn, size_t out[3]);
int truthy_attr(attr_site *site, PyObject *o, PyObject *name);
int bump_counter(PyObject *o, PyObject *name);

#endif
