/* _launcher_internal.h: what the parts of _xpukit_launcher share among themselves (not with the
 * dispatch: that is _launcher.h), top floor first (each calls only the parts below it;
 * tests/host/test_c_graph.py checks it): _launcher.c: the module, bind() and the Launcher;
 * _launcher_args.c: converting and checking the arguments; _launcher_table.c: the AllocTable. Built together with -flto, so the per-launch calls
 * between parts are inlined as if they were one file.
 */
#ifndef XPUKIT_UR_LAUNCHER_INTERNAL_H
#define XPUKIT_UR_LAUNCHER_INTERNAL_H

#include "_launcher.h"

/* What the launcher reads from Python objects, by role: each role's attribute name comes from
 * xpukit/runtime/ur/seam.py (LAUNCHER_READS) through bind(); the C holds no attribute name. */
#define XPUKIT_LAUNCHER_READS(X) X(ADDRESS) X(ALLOCATION_HANDLE) X(ARRAY_ALLOC) X(ARRAY_DTYPE)
enum {
#define XPUKIT_ROLE_ENUM(r) READ_##r,
    XPUKIT_LAUNCHER_READS(XPUKIT_ROLE_ENUM)
#undef XPUKIT_ROLE_ENUM
        N_LAUNCHER_READS
};
/* interned by bind(); all NULL before it (a Launcher refuses to be made until then) */
extern PyObject *launcher_names[N_LAUNCHER_READS];

/* xpukit's own memory types (bind()): their address is read from the instance (the allocation's
 * handle, None once closed; the array's allocation) without running a property. */
extern PyTypeObject *usm_type, *device_array_type;
/* DeviceArray's __slots__ for ARRAY_ALLOC and ARRAY_DTYPE: their offsets in the instance (0: read as attributes) */
extern Py_ssize_t alloc_offset, dtype_offset;

extern PyTypeObject AllocTableType, LauncherType;

/* _launcher_args.c */
int own_address(PyObject *o, uint64_t *out);
PyObject *dtype_of(PyObject *o);
int lookup_address(PyObject *o, PyObject **out);
int check_live(Launcher *l, uint64_t addr);
int convert(Launcher *l, char kind, PyObject *o, uint64_t *bits, size_t *size);
int convert_pre(Launcher *l, char kind, const pre_t *p, uint64_t *bits, size_t *size);
int get_grid(PyObject *o, size_t *out);
PyObject *arg_error(Launcher *l, Py_ssize_t index, int code, PyObject *value);
int launch_prepare(Launcher *l, const size_t *g, PyObject *const *items, Py_ssize_t n, const pre_t *pre,
                   uint64_t checked_generation, uint64_t *vals, size_t *sizes);

#endif
