/* _launcher.h: what _xpukit_launcher (the UR launch path, _launcher.c) shares with the C that
 * builds on it (Triton's dispatch, xpukit/runtime/triton/_dispatch.c, module _xpukit_dispatch):
 * the AllocTable and Launcher layouts, the attribute-read cache both use, and the table of
 * functions the launcher hands out through its capsule _xpukit_launcher._C_API. Attribute names
 * are never written here: each module gets its own from Python at import (its bind()), declared in
 * xpukit/runtime/ur/seam.py and xpukit/runtime/triton/seam.py. One header, so
 * the two modules agree on every layout; XPUKIT_UR_API_VERSION names it at import.
 */
#ifndef XPUKIT_UR_LAUNCHER_H
#define XPUKIT_UR_LAUNCHER_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
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

/* ------------------------------------------------------------------ attribute reads */

/* How o.name is read for objects of one type (an attribute site's cache): what the generic lookup
 * would do, decided from the type alone and valid while the type's version tag is unchanged (CPython
 * clears the tag on every change to the type or its bases: a new attribute, a new __getattribute__,
 * a changed MRO). Only the GIL holder reads or fills a site, and filling runs no Python code. */
typedef struct {
    PyTypeObject *type; /* NULL: empty */
    unsigned int tag;
    Py_ssize_t how; /* -1: the instance dict, > 0: a __slots__ member's offset, 0: PyObject_GetAttr */
    /* set where the site is defined: the instance dict may be made (see plain_dict), for a read
     * on every launch of an object Python rarely reads after (the kit's own allocation) */
    int make_dict;
} attr_site;

/* 1: o's instance dict may be read as a dict without changing o. Not so for a type whose dict
 * CPython manages (3.11+: every class without __slots__): its attributes live in an inline values
 * array until something asks for the dict, and _PyObject_GetDictPtr makes one for good; from then
 * on Python's reads of that instance's attributes specialize no further than the dict's path, or
 * not at all (Session.finish's reads of session.queue & co stayed adaptive: the generic lookup). */
static inline int plain_dict(PyTypeObject *t) {
#ifdef Py_TPFLAGS_MANAGED_DICT
    return !(t->tp_flags & Py_TPFLAGS_MANAGED_DICT);
#else
    (void)t;
    return 1;
#endif
}

static inline Py_ssize_t attr_how(PyTypeObject *t, PyObject *name, int make_dict) {
    if (t->tp_getattro != PyObject_GenericGetAttr) return 0; /* __getattr__/__getattribute__ */
    PyObject *descr = _PyType_Lookup(t, name);             /* borrowed */
    if (!descr) /* nothing of that name on the MRO: the generic lookup reads the dict */
        return make_dict || plain_dict(t) ? -1 : 0;
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
static inline PyObject *inst_attr(attr_site *site, PyObject *o, PyObject *name) {
    PyTypeObject *t = Py_TYPE(o);
    Py_ssize_t how;
    if (site->type == t && site->tag == t->tp_version_tag && (t->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)) {
        how = site->how;
    } else {
        how = attr_how(t, name, site->make_dict); /* assigns the type a version tag when it has none */
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

/* o.name as getattr() reads it, except that a missing attribute makes no exception (CPython's
 * AttributeError, with its formatted message, costs ~3,200 instructions per argument): 1 and a new
 * reference in *out, 0 (no error) when o has no such attribute, -1 with the lookup's error. */
static inline int lookup_attr(PyObject *o, PyObject *name, PyObject **out) {
#if PY_VERSION_HEX >= 0x030D0000
    return PyObject_GetOptionalAttr(o, name, out);
#else
    return _PyObject_LookupAttr(o, name, out);
#endif
}

/* For a module's bind(): a key of reads (a dict) that is none of the n roles nor the n2 roles2
 * (borrowed), or NULL when every key is one of them. */
static inline PyObject *unknown_role(PyObject *reads, const char *const *roles, int n, const char *const *roles2, int n2) {
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(reads, &pos, &key, &value)) {
        int known = 0;
        for (int i = 0; !known && i < n + n2; i++)
            known = PyUnicode_Check(key) && PyUnicode_CompareWithASCIIString(key, i < n ? roles[i] : roles2[i - n]) == 0;
        if (!known) return key;
    }
    return NULL;
}

/* ------------------------------------------------------------------ AllocTable */

typedef struct {
    PyObject_HEAD
    uint64_t *starts;
    uint64_t *ends;
    Py_ssize_t n, cap;
    uint64_t generation; /* bumped on every removal: kernels re-bind pointers after a free */
} AllocTable;

/* Index of the allocation holding addr, or -1. */
static inline Py_ssize_t table_find(const AllocTable *t, uint64_t addr) {
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

_Static_assert(sizeof(unsigned long) == sizeof(uint64_t), "an LP64 platform: unsigned long is 64 bits");
/* PyLong_AsUnsignedLong, not ...LongLong: CPython 3.11 converts a long long of more than one digit
 * (any device address) through _PyLong_AsByteArray, ~150 instructions against ~30; same range, same
 * errors (OverflowError when negative or too large, TypeError for a non-int). */
static inline int read_u64(PyObject *o, uint64_t *out) {
    unsigned long v = PyLong_AsUnsignedLong(o);
    if (v == (unsigned long)-1 && PyErr_Occurred()) return -1;
    *out = (uint64_t)v;
    return 0;
}

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
    /* grow_with(): called with the number of programs before a launch of more programs than any
     * before (Triton's per-program scratch); NULL: none */
    PyObject *on_grow;
    uint64_t grown; /* the most programs on_grow has been called for */
} Launcher;

static inline void *fnptr(PyObject *o) {
    unsigned long v = PyLong_AsUnsignedLong(o); /* read_u64's reason */
    if (v == (unsigned long)-1 && PyErr_Occurred()) return NULL;
    return (void *)(uintptr_t)v;
}

/* What a caller already read from an argument while matching it (GridCall's key match): the
 * launch converts from these instead of reading the object again. tag 0: nothing, read the object. */
typedef struct {
    unsigned char tag; /* PRE_INT (an exact int that fits a long long), PRE_FLOAT (an exact float), PRE_ADDR */
    uint64_t v;        /* the long long's bits, the double's bits, or the address get_address() reads */
} pre_t;
enum { PRE_NONE = 0, PRE_INT = 1, PRE_FLOAT = 2, PRE_ADDR = 3 };

/* ------------------------------------------------------------------ the capsule */

#define XPUKIT_UR_API_VERSION 4
#define XPUKIT_UR_API_CAPSULE "_xpukit_launcher._C_API"

typedef struct {
    int version; /* XPUKIT_UR_API_VERSION of the launcher that filled it */
    PyTypeObject *alloc_table_type, *launcher_type;
    /* Launcher.launch's C function: a bound launch() of a Launcher is recognised by it */
    PyCFunction launcher_launch;
    /* see _launcher.c for each */
    PyObject *(*launch_core)(Launcher *l, void *queue, const size_t *g, PyObject *const *items, Py_ssize_t n,
                             int want_event, const pre_t *pre, uint64_t checked_generation);
    PyObject *(*arg_error)(Launcher *l, Py_ssize_t index, int code, PyObject *value);
    int (*get_grid)(PyObject *o, size_t *out);
    int (*own_address)(PyObject *o, uint64_t *out);
    PyObject *(*dtype_of)(PyObject *o);
    /* o's address attribute (.ptr, named by xpukit/runtime/ur/seam.py): 1 and a new reference, 0
     * when o has none (no exception made), -1 with its error */
    int (*lookup_address)(PyObject *o, PyObject **out);
} xpukit_ur_api;

#endif
