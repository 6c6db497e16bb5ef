/* _dispatch_shared.c (part of _xpukit_dispatch): what every other part uses, and nothing here calls
 * them back: the names and Hit positions bind() hands over (_dispatch.c fills them), the launcher's
 * C API, CPython's small ints, the grid's padding and two attribute helpers.
 */
#include "_dispatch.h"

const xpukit_ur_api *ur;
PyObject *dispatch_names[N_DISPATCH_READS];
Py_ssize_t hit_pos[N_HIT_FIELDS];
Py_ssize_t hit_len;
PyObject *small_ints[128];
PyObject *int_one;

/* Size i of a grid tuple of gn (1 to 3) sizes: the missing ones are 1. */
PyObject *grid_dim(PyObject *grid, Py_ssize_t gn, int i) { return i < gn ? PyTuple_GET_ITEM(grid, i) : int_one; }

/* The grid tuple's three sizes for l's launch: 0, or -1 with l's argument error (the grid named). */
int grid_sizes(Launcher *l, PyObject *grid, Py_ssize_t gn, size_t out[3]) {
    for (int i = 0; i < 3; i++) {
        PyObject *gi = grid_dim(grid, gn, i);
        if (ur->get_grid(gi, &out[i])) {
            Py_INCREF(gi); /* the error's callback runs Python code */
            ur->arg_error(l, -1, ARG_GRID, gi);
            Py_DECREF(gi);
            return -1;
        }
    }
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

/* stats.launches += 1 for a plain instance (a dataclass): the instance dict itself when nothing
 * on the type takes part (no __getattr__/__setattr__, no descriptor of that name) and reading it as
 * a dict changes nothing (plain_dict), else getattr/setattr. */
int bump_counter(PyObject *o, PyObject *name) {
    PyTypeObject *t = Py_TYPE(o);
    PyObject *cls_attr = _PyType_Lookup(t, name); /* borrowed; a dataclass keeps the default here */
    if (plain_dict(t) && t->tp_getattro == PyObject_GenericGetAttr && t->tp_setattro == PyObject_GenericSetAttr &&
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
