/* _launcher_table.c (part of _xpukit_launcher): AllocTable, one session's live USM allocations as
 * sorted [start, end) ranges; table_find() (in _launcher.h) bisects them on every pointer argument.
 */
#include "_launcher_internal.h"

static void table_dealloc(AllocTable *t) {
    PyMem_Free(t->starts);
    PyMem_Free(t->ends);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static PyObject *table_add(AllocTable *t, PyObject *const *args, Py_ssize_t nargs) {
    uint64_t start, size;
    if (nargs != 2) return PyErr_Format(PyExc_TypeError, "add(start, size) takes 2 arguments");
    if (read_u64(args[0], &start) || read_u64(args[1], &size)) return NULL;
    if (size == 0 || start + size < start) return PyErr_Format(PyExc_ValueError, "bad allocation range");
    if (t->n == t->cap) {
        Py_ssize_t cap = t->cap ? t->cap * 2 : 16;
        uint64_t *s = PyMem_Realloc(t->starts, cap * sizeof(uint64_t));
        if (!s) return PyErr_NoMemory();
        t->starts = s;
        uint64_t *e = PyMem_Realloc(t->ends, cap * sizeof(uint64_t));
        if (!e) return PyErr_NoMemory();
        t->ends = e;
        t->cap = cap;
    }
    Py_ssize_t lo = 0, hi = t->n;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (t->starts[mid] < start) lo = mid + 1;
        else hi = mid;
    }
    memmove(t->starts + lo + 1, t->starts + lo, (t->n - lo) * sizeof(uint64_t));
    memmove(t->ends + lo + 1, t->ends + lo, (t->n - lo) * sizeof(uint64_t));
    t->starts[lo] = start;
    t->ends[lo] = start + size;
    t->n++;
    Py_RETURN_NONE;
}

static PyObject *table_remove(AllocTable *t, PyObject *arg) {
    uint64_t start;
    if (read_u64(arg, &start)) return NULL;
    t->generation++;
    Py_ssize_t i = table_find(t, start);
    if (i < 0 || t->starts[i] != start) Py_RETURN_FALSE;
    memmove(t->starts + i, t->starts + i + 1, (t->n - i - 1) * sizeof(uint64_t));
    memmove(t->ends + i, t->ends + i + 1, (t->n - i - 1) * sizeof(uint64_t));
    t->n--;
    Py_RETURN_TRUE;
}

static PyObject *table_find_py(AllocTable *t, PyObject *arg) {
    uint64_t addr;
    if (!PyLong_Check(arg)) Py_RETURN_NONE;
    if (read_u64(arg, &addr)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    Py_ssize_t i = table_find(t, addr);
    if (i < 0) Py_RETURN_NONE;
    return Py_BuildValue("(KK)", (unsigned long long)t->starts[i], (unsigned long long)(t->ends[i] - t->starts[i]));
}

static Py_ssize_t table_len(AllocTable *t) { return t->n; }

static PyObject *table_generation(AllocTable *t, void *closure) {
    (void)closure;
    return PyLong_FromUnsignedLongLong(t->generation);
}

static PyMethodDef table_methods[] = {
    {"add", (PyCFunction)(void (*)(void))table_add, METH_FASTCALL, "add(start, size): a live allocation"},
    {"remove", (PyCFunction)table_remove, METH_O, "remove(start) -> bool: the allocation was freed"},
    {"find", (PyCFunction)table_find_py, METH_O, "find(addr) -> (start, size) | None"},
    {NULL, NULL, 0, NULL},
};
static PyGetSetDef table_getset[] = {
    {"generation", (getter)table_generation, NULL, "bumped on every removal", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
static PySequenceMethods table_as_sequence = {.sq_length = (lenfunc)table_len};

PyTypeObject AllocTableType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_xpukit_launcher.AllocTable",
    .tp_basicsize = sizeof(AllocTable),
    .tp_dealloc = (destructor)table_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Live USM allocations of one session: sorted [start, end) ranges, bisected.",
    .tp_methods = table_methods,
    .tp_getset = table_getset,
    .tp_as_sequence = &table_as_sequence,
    .tp_new = PyType_GenericNew,
};
