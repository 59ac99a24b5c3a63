/* XXH3-64 of many byte ranges of one buffer in one call (the send path's checksums).
 *
 * The hash itself is not implemented here: bind(path) finds XXH3_64bits in the xxhash
 * package's own extension module (already loaded by Python), so the digests are exactly
 * the ones xxhash.xxh3_64_intdigest gives. This module only adds the loop, so a batch of
 * 1,000 messages costs one call instead of 1,000 Python-level slices and calls.
 *
 * xxh3_ranges(blob, starts, ends, out): blob is any bytes-like object; starts and ends are
 * C-contiguous int64 arrays of equal length; out a writable uint64 array of that length.
 * Every range must satisfy 0 <= start <= end <= len(blob) (ValueError otherwise, before
 * anything is hashed). The GIL is released while hashing.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>

typedef uint64_t (*xxh3_fn)(const void *, size_t);
static xxh3_fn xxh3 = NULL;

static PyObject *bind(PyObject *self, PyObject *arg) {
    const char *path = PyUnicode_AsUTF8(arg);
    if (path == NULL) return NULL;
    void *handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (handle == NULL) handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        PyErr_Format(PyExc_OSError, "cannot open %s: %s", path, dlerror());
        return NULL;
    }
    void *symbol = dlsym(handle, "XXH3_64bits");
    if (symbol == NULL) {
        PyErr_Format(PyExc_OSError, "%s exports no XXH3_64bits", path);
        return NULL;
    }
    xxh3 = (xxh3_fn)symbol;
    Py_RETURN_NONE;
}

static int check_ranges(const int64_t *starts, const int64_t *ends, Py_ssize_t n,
                        Py_ssize_t size) {
    for (Py_ssize_t i = 0; i < n; i++) {
        if (starts[i] < 0 || starts[i] > ends[i] || ends[i] > size) {
            PyErr_Format(PyExc_ValueError, "range %zd [%lld, %lld) outside a %zd-byte buffer",
                         i, (long long)starts[i], (long long)ends[i], size);
            return -1;
        }
    }
    return 0;
}

static PyObject *xxh3_ranges(PyObject *self, PyObject *args) {
    Py_buffer blob, starts, ends, out;
    if (xxh3 == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "bind() was not called");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "y*y*y*w*", &blob, &starts, &ends, &out)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = starts.len / 8;
    if (starts.len % 8 || ends.len != starts.len || out.len != starts.len) {
        PyErr_SetString(PyExc_ValueError, "starts, ends and out must be 8-byte arrays of one length");
    } else if (check_ranges(starts.buf, ends.buf, n, blob.len) == 0) {
        const char *base = blob.buf;
        const int64_t *s = starts.buf, *e = ends.buf;
        uint64_t *o = out.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) o[i] = xxh3(base + s[i], (size_t)(e[i] - s[i]));
        Py_END_ALLOW_THREADS
        result = Py_None;
        Py_INCREF(result);
    }
    PyBuffer_Release(&blob);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&ends);
    PyBuffer_Release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"bind", bind, METH_O, "bind(path): find XXH3_64bits in the xxhash extension at path"},
    {"xxh3_ranges", xxh3_ranges, METH_VARARGS, "xxh3_ranges(blob, starts, ends, out)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_batchhash", NULL, -1, methods};

PyMODINIT_FUNC PyInit__batchhash(void) { return PyModule_Create(&module); }
