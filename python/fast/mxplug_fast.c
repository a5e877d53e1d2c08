/* mxplug_fast.c — the optional CPython extension `_mxplug_fast`: the
 * NDArray operators between two arrays (+ - * /) and NDArray's finalizer
 * in C, so a small `a + b` costs one mxp_invoke and no Python frame, no
 * ctypes argument conversion, no ctypes array objects.
 *
 * It is optional: `make` builds it (into $(BUILD)/lib, next to
 * libmxplug.so) only where Python's headers are installed (Debian's
 * python3-dev), and the package uses it when it finds it there or in the
 * installed package, unless MXPLUG_NO_FAST=1; without it the same methods
 * run in Python over ctypes (python/mxplug/ndarray.py), with the same
 * results and errors.
 *
 * It does not link against libmxplug: install() is given the addresses of
 * mxp_invoke, mxp_ndarray_release and mxp_autograd_unmark from the ctypes
 * library the package loaded, so both paths always call one library.  It
 * does not define a type: it puts method descriptors on the package's
 * NDArray class (a Python class with __slots__ _h, _grad, _shape), points
 * the class's number slots for + - * / and its finalizer straight at them
 * (saving Python's generic slot: a method lookup and call per operator),
 * and reads/writes those slots at the offsets their member descriptors give.
 * Everything that is not an NDArray-with-NDArray operator (scalars, numpy
 * arrays, subclass operands, errors) is handed to the Python function the
 * package passes for that operator, so the semantics live in one place.
 *
 * Invariants: the slots hold what the Python code stores (_h an int handle
 * or None, _shape a tuple or None); the GIL is released around the C calls
 * that can block (mxp_invoke may wait for the engine), as ctypes does. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <mxplug.h>

typedef int (*invoke_fn)(const char *, int, mxp_ndarray *const *, int *, mxp_ndarray **, int, const char *const *,
                         const char *const *);
typedef void (*release_fn)(mxp_ndarray *);
typedef int (*unmark_fn)(mxp_ndarray *);
_Static_assert(__builtin_types_compatible_p(invoke_fn, __typeof__(&mxp_invoke)), "mxp_invoke's signature");
_Static_assert(__builtin_types_compatible_p(release_fn, __typeof__(&mxp_ndarray_release)),
               "mxp_ndarray_release's signature");

static invoke_fn c_invoke;
static release_fn c_release;
static unmark_fn c_unmark; /* NULL: a library without autograd */
static PyTypeObject *nd_type;   /* the package's NDArray class (a reference) */
static PyObject *check_fn;      /* base.check: raises MXNetError for a status */
static PyObject *shape_name;    /* "shape" */
static Py_ssize_t off_h, off_grad, off_shape;

#define SLOT(o, off) (*(PyObject **)((char *)(o) + (off)))

/* One binary operator: the ops for equal and for different shapes, and the
 * Python method that handles every other operand. */
typedef struct binop {
    const char *name;
    const char *elem, *bcast;
    PyObject *fallback;
} binop;

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, N_OPS };
static binop ops[N_OPS] = {
    {"__add__", "elemwise_add", "broadcast_add", NULL},
    {"__sub__", "elemwise_sub", "broadcast_sub", NULL},
    {"__mul__", "elemwise_mul", "broadcast_mul", NULL},
    {"__truediv__", "elemwise_div", "broadcast_div", NULL},
};

/* The shape tuple of an NDArray: the cached slot, else the `shape`
 * property (which caches it).  A new reference, NULL with an exception. */
static PyObject *shape_of(PyObject *a) {
    PyObject *s = SLOT(a, off_shape);
    if (s && s != Py_None) {
        Py_INCREF(s);
        return s;
    }
    return PyObject_GetAttr(a, shape_name);
}

/* The handle in an NDArray's _h slot; NULL for a released array (None),
 * which mxp_invoke then reports as a NULL input. */
static void *handle_of(PyObject *a) {
    PyObject *h = SLOT(a, off_h);
    if (!h || !PyLong_CheckExact(h)) return NULL;
    void *p = PyLong_AsVoidPtr(h);
    if (!p) PyErr_Clear();
    return p;
}

/* s == so for two shape tuples: the usual case (tuples of small ints,
 * which Python keeps one object each of) without a rich comparison per
 * item; anything else through the general comparison.  -1 with an error. */
static int shapes_equal(PyObject *s, PyObject *so) {
    if (s == so) return 1;
    if (PyTuple_CheckExact(s) && PyTuple_CheckExact(so)) {
        Py_ssize_t n = PyTuple_GET_SIZE(s);
        if (n != PyTuple_GET_SIZE(so)) return 0;
        Py_ssize_t i = 0;
        while (i < n && PyTuple_GET_ITEM(s, i) == PyTuple_GET_ITEM(so, i)) i++;
        if (i == n) return 1;
    }
    return PyObject_RichCompareBool(s, so, Py_EQ);
}

static PyObject *run_binop(const binop *op, PyObject *self, PyObject *other) {
    if (Py_TYPE(other) != nd_type || Py_TYPE(self) != nd_type)
        return PyObject_CallFunctionObjArgs(op->fallback, self, other, NULL);
    PyObject *s = shape_of(self);
    if (!s) return NULL;
    PyObject *so = shape_of(other);
    if (!so) {
        Py_DECREF(s);
        return NULL;
    }
    int same = shapes_equal(s, so);
    Py_DECREF(so);
    if (same < 0) {
        Py_DECREF(s);
        return NULL;
    }
    mxp_ndarray *ins[2] = {handle_of(self), handle_of(other)};
    mxp_ndarray *out = NULL;
    int n_out = 1, rc;
    const char *name = same ? op->elem : op->bcast;
    Py_BEGIN_ALLOW_THREADS
    rc = c_invoke(name, 2, ins, &n_out, &out, 0, NULL, NULL);
    Py_END_ALLOW_THREADS
    if (rc) {
        Py_DECREF(s);
        PyObject *r = PyObject_CallFunction(check_fn, "i", rc);
        if (r) { /* check() did not raise: cannot happen for rc != 0 */
            Py_DECREF(r);
            PyErr_Format(PyExc_RuntimeError, "mxplug: %s failed with status %d", name, rc);
        }
        return NULL;
    }
    PyObject *h = PyLong_FromVoidPtr(out);
    PyObject *a = h ? nd_type->tp_alloc(nd_type, 0) : NULL;
    if (!a) {
        Py_XDECREF(h);
        Py_DECREF(s);
        Py_BEGIN_ALLOW_THREADS
        c_release(out);
        Py_END_ALLOW_THREADS
        return NULL;
    }
    SLOT(a, off_h) = h;
    Py_INCREF(Py_None);
    SLOT(a, off_grad) = Py_None;
    if (same) {
        SLOT(a, off_shape) = s; /* elementwise: the inputs' shape */
    } else {
        Py_DECREF(s);
        Py_INCREF(Py_None);
        SLOT(a, off_shape) = Py_None;
    }
    return a;
}

#define BINOP_METHOD(fn, idx) \
    static PyObject *fn(PyObject *self, PyObject *other) { return run_binop(&ops[idx], self, other); }
BINOP_METHOD(nd_add, OP_ADD)
BINOP_METHOD(nd_sub, OP_SUB)
BINOP_METHOD(nd_mul, OP_MUL)
BINOP_METHOD(nd_div, OP_DIV)

/* NDArray.__del__: release the handle (after unmarking an autograd
 * variable, whose table entry holds a reference), leaving _h None. */
static PyObject *nd_del(PyObject *self, PyObject *unused) {
    (void)unused;
    PyObject *h = SLOT(self, off_h);
    if (!h || !PyLong_CheckExact(h)) Py_RETURN_NONE;
    void *p = PyLong_AsVoidPtr(h);
    if (!p) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    SLOT(self, off_h) = Py_None;
    Py_INCREF(Py_None);
    Py_DECREF(h);
    PyObject *g = SLOT(self, off_grad);
    int unmark = g && g != Py_None && c_unmark;
    /* The last reference's free may wait for pending work on the array. */
    Py_BEGIN_ALLOW_THREADS
    if (unmark) c_unmark(p);
    c_release(p);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* The type's finalizer slot: __del__ without the method lookup and call
 * (Python's own slot looks __del__ up and calls it through a frame-less
 * method call; this is the same function, reached directly).  As Python's
 * slot does, it keeps the exception being handled, if any. */
static void nd_finalize(PyObject *self) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *r = nd_del(self, NULL);
    if (!r) PyErr_WriteUnraisable(self);
    Py_XDECREF(r);
    PyErr_Restore(et, ev, tb);
}

/* The type's number slots for + - * /, doing what Python's generic slot
 * for a class did with these methods: Python calls a type's slot for
 * either operand (binary_op1), so a left NDArray runs the operator method
 * (the C one: an NDArray right operand runs at once, anything else goes
 * to the Python method), and a left operand of another type means the
 * right one is the NDArray: its reflected method (__radd__ ...), or
 * NotImplemented when it has none. */
static PyObject *rnames[N_OPS];
static PyObject *nb_run(int idx, PyObject *a, PyObject *b) {
    if (Py_TYPE(a) == nd_type) return run_binop(&ops[idx], a, b);
    PyObject *m = PyObject_GetAttr(b, rnames[idx]);
    if (!m) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return NULL;
        PyErr_Clear();
        Py_RETURN_NOTIMPLEMENTED;
    }
    PyObject *r = PyObject_CallOneArg(m, a);
    Py_DECREF(m);
    return r;
}
#define NB_SLOT(fn, idx) \
    static PyObject *fn(PyObject *a, PyObject *b) { return nb_run(idx, a, b); }
NB_SLOT(nb_add, OP_ADD)
NB_SLOT(nb_sub, OP_SUB)
NB_SLOT(nb_mul, OP_MUL)
NB_SLOT(nb_div, OP_DIV)

static PyMethodDef method_defs[] = {
    {"__add__", nd_add, METH_O, "self + other (C fast path)"},
    {"__sub__", nd_sub, METH_O, "self - other (C fast path)"},
    {"__mul__", nd_mul, METH_O, "self * other (C fast path)"},
    {"__truediv__", nd_div, METH_O, "self / other (C fast path)"},
    {"__del__", nd_del, METH_NOARGS, "release the handle (C fast path)"},
};

static int slot_offset(PyTypeObject *t, const char *name, Py_ssize_t *off) {
    PyObject *d = PyDict_GetItemString(t->tp_dict, name); /* borrowed */
    if (!d || Py_TYPE(d) != &PyMemberDescr_Type) {
        PyErr_Format(PyExc_TypeError, "_mxplug_fast: %s.%s is not a __slots__ member", t->tp_name, name);
        return -1;
    }
    PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
    if (m->type != T_OBJECT_EX) {
        PyErr_Format(PyExc_TypeError, "_mxplug_fast: %s.%s is not an object slot", t->tp_name, name);
        return -1;
    }
    *off = m->offset;
    return 0;
}

/* install(cls, invoke_addr, release_addr, unmark_addr, check, fallbacks):
 * fallbacks maps each operator name (__add__ ...) to the Python function
 * run for operands that are not two NDArrays.  Sets the C methods on cls. */
static PyObject *install(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *cls, *check, *fallbacks;
    unsigned long long a_invoke, a_release, a_unmark;
    if (!PyArg_ParseTuple(args, "O!KKKOO!", &PyType_Type, &cls, &a_invoke, &a_release, &a_unmark, &check,
                          &PyDict_Type, &fallbacks))
        return NULL;
    if (!a_invoke || !a_release) {
        PyErr_SetString(PyExc_ValueError, "_mxplug_fast.install: NULL function address");
        return NULL;
    }
    if (nd_type) {
        PyErr_SetString(PyExc_RuntimeError, "_mxplug_fast.install: already installed");
        return NULL;
    }
    PyTypeObject *t = (PyTypeObject *)cls;
    Py_ssize_t oh, og, os;
    if (slot_offset(t, "_h", &oh) || slot_offset(t, "_grad", &og) || slot_offset(t, "_shape", &os)) return NULL;
    for (int i = 0; i < N_OPS; i++) {
        PyObject *f = PyDict_GetItemString(fallbacks, ops[i].name);
        if (!f || !PyCallable_Check(f)) {
            PyErr_Format(PyExc_TypeError, "_mxplug_fast.install: no fallback for %s", ops[i].name);
            return NULL;
        }
    }
    shape_name = PyUnicode_InternFromString("shape");
    if (!shape_name) return NULL;
    for (int i = 0; i < N_OPS; i++) {
        ops[i].fallback = PyDict_GetItemString(fallbacks, ops[i].name);
        Py_INCREF(ops[i].fallback);
    }
    off_h = oh, off_grad = og, off_shape = os;
    c_invoke = (invoke_fn)(uintptr_t)a_invoke;
    c_release = (release_fn)(uintptr_t)a_release;
    c_unmark = a_unmark ? (unmark_fn)(uintptr_t)a_unmark : NULL;
    Py_INCREF(check);
    check_fn = check;
    Py_INCREF(cls);
    nd_type = t;
    for (size_t i = 0; i < sizeof method_defs / sizeof method_defs[0]; i++) {
        PyObject *d = PyDescr_NewMethod(t, &method_defs[i]);
        if (!d) return NULL;
        int rc = PyObject_SetAttrString(cls, method_defs[i].ml_name, d);
        Py_DECREF(d);
        if (rc) return NULL;
    }
    /* a + b on two arrays is commutative for + and *: the reflected
     * methods are the same (as the Python class has them). */
    if (PyObject_SetAttrString(cls, "__radd__", PyDict_GetItemString(t->tp_dict, "__add__")) ||
        PyObject_SetAttrString(cls, "__rmul__", PyDict_GetItemString(t->tp_dict, "__mul__")))
        return NULL;
    /* Setting the methods made Python's generic slots; put the direct ones
     * over them (a later assignment of NDArray.__add__ etc. replaces them
     * again, as for any class). */
    static const char *const rn[N_OPS] = {"__radd__", "__rsub__", "__rmul__", "__rtruediv__"};
    for (int i = 0; i < N_OPS; i++)
        if (!rnames[i] && !(rnames[i] = PyUnicode_InternFromString(rn[i]))) return NULL;
    PyNumberMethods *nb = t->tp_as_number;
    if (nb && t->tp_finalize) {
        nb->nb_add = nb_add;
        nb->nb_subtract = nb_sub;
        nb->nb_multiply = nb_mul;
        nb->nb_true_divide = nb_div;
        t->tp_finalize = nd_finalize;
        PyType_Modified(t);
    }
    Py_RETURN_NONE;
}

static PyMethodDef module_defs[] = {
    {"install", install, METH_VARARGS, "install(cls, invoke, release, unmark, check, fallbacks): C operators on cls"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_mxplug_fast", "mxplug's optional C fast path for NDArray operators", -1, module_defs,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__mxplug_fast(void) { return PyModule_Create(&module); }
