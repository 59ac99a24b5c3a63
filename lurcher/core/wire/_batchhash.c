/* The send path's per-message loops, in C: a batch costs one call each, not a numpy pass per
 * header field or a Python call per message.
 *
 * The hash itself is not implemented here: bind(path) finds XXH3_64bits (its CPU-dispatched
 * entry where the build has one) in the xxhash
 * package's own extension module (already loaded by Python), so the digests are exactly
 * the ones xxhash.xxh3_64_intdigest gives.
 *
 * xxh3_ranges(blob, starts, ends, out): blob is any bytes-like object; starts and ends are
 * C-contiguous int64 arrays of equal length; out a writable uint64 array of that length.
 * Every range must satisfy 0 <= start <= end <= len(blob) (ValueError otherwise, before
 * anything is hashed). The GIL is released while hashing.
 *
 * scan(index, blob, max_payload, max_user_headers) -> (check, message, with_headers): the
 * checks of MessageBatch.validate in its order (batch.py's SCAN_* numbers; 0: valid), the
 * first failing message of the first failing check, and how many messages have user
 * headers. Reads a header only once the slots are known to hold one.
 *
 * header_blocks(blob, begins, ends, fixed, max_kind, max_field) -> None or (block, fault,
 * is_key): the user-headers rules of headers.validate_headers over every block
 * blob[begins[i]:ends[i]] (checked to lie in the blob), block by block; for the first block
 * that breaks one, its index, the fault (HB_* below, header_blocks.py names them) and whether
 * the field at fault is a key. fixed is a 256-entry int64 table: kind -> exact value length
 * (0: any). Per block, the structure of every field first, then the kinds (the 0.8 order).
 *
 * stamp(blob, index, base_offset, timestamp, randoms): what MessageBatch.stamp writes, in
 * place: offsets base.., the timestamp, ids for messages whose id is 0 (UUIDv4 bits over
 * randoms, 2 u64 per message) and then the checksums. Checks every slot lies in the blob
 * and holds a header first (ValueError). The GIL is released while stamping.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

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
    /* The _dispatch entry picks AVX512, AVX2 or SSE2 by the CPU at run time (xxhash's
     * x86 dispatcher); plain XXH3_64bits is the build's baseline (SSE2 on x86-64), 1.5-2x
     * slower on a 1 KB message. Both give the same digests. */
    const char *name = "XXH3_64bits_dispatch";
    void *symbol = dlsym(handle, name);
    if (symbol == NULL) symbol = dlsym(handle, name = "XXH3_64bits");
    if (symbol == NULL) {
        PyErr_Format(PyExc_OSError, "%s exports no XXH3_64bits", path);
        return NULL;
    }
    xxh3 = (xxh3_fn)symbol;
    return PyUnicode_FromString(name);
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

/* The message layout (wire-protocol 9.1) and the index entry layout, as batch.py has them. */
#define HEADER_BYTES 64
#define INDEX_ENTRY_BYTES 16
#define CHECKSUM_AT 0
#define ID_AT 8
#define OFFSET_AT 24
#define TIMESTAMP_AT 32
#define USER_HEADERS_LENGTH_AT 48
#define PAYLOAD_LENGTH_AT 52
#define RESERVED_AT 56

static uint32_t u32_at(const char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t u64_at(const char *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static void put_u64(char *p, uint64_t v) { memcpy(p, &v, 8); }

/* End position of message i (the index entry's u32 at byte 4). */
static int64_t end_of(const char *index, Py_ssize_t i) {
    return (int64_t)u32_at(index + i * INDEX_ENTRY_BYTES + 4);
}

static int64_t start_of(const char *index, Py_ssize_t i) {
    return i == 0 ? 0 : end_of(index, i - 1);
}

/* The checks of MessageBatch.validate, in its order; each returns the first failing
 * message or -1. The numbers are batch.py's SCAN_* constants. */
enum { SCAN_OK, SCAN_OFFSET, SCAN_TIMESTAMP, SCAN_DECREASING, SCAN_LAST_END, SCAN_TOO_SMALL,
       SCAN_OVER_SLOT, SCAN_BIG_PAYLOAD, SCAN_BIG_HEADERS, SCAN_UNDER_SLOT, SCAN_RESERVED };

static Py_ssize_t first_nonzero_field(const char *index, Py_ssize_t n, int at, int width) {
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *e = index + i * INDEX_ENTRY_BYTES + at;
        if (width == 4 ? u32_at(e) != 0 : u64_at(e) != 0) return i;
    }
    return -1;
}

static Py_ssize_t first_slot_below(const char *index, Py_ssize_t n, int64_t least) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (end_of(index, i) - start_of(index, i) < least) return i;
    return -1;
}

static int64_t declared_size(const char *blob, int64_t start) {
    return HEADER_BYTES + (int64_t)u32_at(blob + start + PAYLOAD_LENGTH_AT)
           + (int64_t)u32_at(blob + start + USER_HEADERS_LENGTH_AT);
}

/* kind: 0 declared > slot, 1 payload > limit, 2 user headers > limit, 3 declared < slot. */
static Py_ssize_t first_bad_header(const char *index, const char *blob, Py_ssize_t n, int kind,
                                   long long limit) {
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t start = start_of(index, i), slot = end_of(index, i) - start;
        int64_t declared = declared_size(blob, start);
        int bad = kind == 0 ? declared > slot
                : kind == 1 ? (int64_t)u32_at(blob + start + PAYLOAD_LENGTH_AT) > limit
                : kind == 2 ? (int64_t)u32_at(blob + start + USER_HEADERS_LENGTH_AT) > limit
                : declared < slot;
        if (bad) return i;
    }
    return -1;
}

static void scan_headers(const char *index, const char *blob, Py_ssize_t n, long long max_payload,
                         long long max_headers, int *check, Py_ssize_t *at) {
    static const int checks[4] = {SCAN_OVER_SLOT, SCAN_BIG_PAYLOAD, SCAN_BIG_HEADERS,
                                  SCAN_UNDER_SLOT};
    for (int kind = 0; kind < 4; kind++) {
        long long limit = kind == 1 ? max_payload : max_headers;
        if ((*at = first_bad_header(index, blob, n, kind, limit)) >= 0) {
            *check = checks[kind];
            return;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (u64_at(blob + start_of(index, i) + RESERVED_AT) != 0) {
            *check = SCAN_RESERVED;
            *at = i;
            return;
        }
    }
}

static void scan_batch(const char *index, Py_ssize_t n, const char *blob, Py_ssize_t blob_len,
                       long long max_payload, long long max_headers, int *check, Py_ssize_t *at) {
    *check = SCAN_OK;
    *at = -1;
    if ((*at = first_nonzero_field(index, n, 0, 4)) >= 0) { *check = SCAN_OFFSET; return; }
    if ((*at = first_nonzero_field(index, n, 8, 8)) >= 0) { *check = SCAN_TIMESTAMP; return; }
    if ((*at = first_slot_below(index, n, 0)) >= 0) { *check = SCAN_DECREASING; return; }
    if (end_of(index, n - 1) != blob_len) { *check = SCAN_LAST_END; *at = n - 1; return; }
    if ((*at = first_slot_below(index, n, HEADER_BYTES)) >= 0) { *check = SCAN_TOO_SMALL; return; }
    scan_headers(index, blob, n, max_payload, max_headers, check, at);
}

static Py_ssize_t count_with_headers(const char *index, const char *blob, Py_ssize_t n) {
    Py_ssize_t count = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        count += u32_at(blob + start_of(index, i) + USER_HEADERS_LENGTH_AT) != 0;
    return count;
}

/* scan(index, blob, max_payload, max_user_headers) -> (check, message, with_headers) */
static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer index, blob;
    long long max_payload, max_headers;
    if (!PyArg_ParseTuple(args, "y*y*LL", &index, &blob, &max_payload, &max_headers)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = index.len / INDEX_ENTRY_BYTES;
    if (n == 0 || index.len % INDEX_ENTRY_BYTES) {
        PyErr_SetString(PyExc_ValueError, "the index must hold whole entries, at least one");
    } else {
        int check;
        Py_ssize_t at, with_headers = 0;
        scan_batch(index.buf, n, blob.buf, blob.len, max_payload, max_headers, &check, &at);
        if (check == SCAN_OK) with_headers = count_with_headers(index.buf, blob.buf, n);
        result = Py_BuildValue("inn", check, at, with_headers);
    }
    PyBuffer_Release(&index);
    PyBuffer_Release(&blob);
    return result;
}

/* UUIDv4 bits as they land in the little-endian id halves (batch.py's _LO_/_HI_ masks). */
#define LO_VERSION_CLEAR (~((uint64_t)0xF << 52))
#define LO_VERSION_SET ((uint64_t)0x4 << 52)
#define HI_VARIANT_CLEAR (~(uint64_t)0xC0)
#define HI_VARIANT_SET ((uint64_t)0x80)

static int check_layout(const char *index, Py_ssize_t n, Py_ssize_t blob_len) {
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t start = start_of(index, i), end = end_of(index, i);
        if (end - start < HEADER_BYTES || end > blob_len) {
            PyErr_Format(PyExc_ValueError, "message %zd [%lld, %lld) is not a valid slot",
                         i, (long long)start, (long long)end);
            return -1;
        }
    }
    return 0;
}

static void stamp_batch(const char *index, Py_ssize_t n, char *blob, uint64_t base,
                        uint64_t timestamp, const uint64_t *randoms) {
    for (Py_ssize_t i = 0; i < n; i++) {
        char *m = blob + start_of(index, i);
        put_u64(m + OFFSET_AT, base + (uint64_t)i);
        put_u64(m + TIMESTAMP_AT, timestamp);
        if (u64_at(m + ID_AT) == 0 && u64_at(m + ID_AT + 8) == 0) {
            put_u64(m + ID_AT, (randoms[2 * i] & LO_VERSION_CLEAR) | LO_VERSION_SET);
            put_u64(m + ID_AT + 8, (randoms[2 * i + 1] & HI_VARIANT_CLEAR) | HI_VARIANT_SET);
        }
        int64_t length = end_of(index, i) - start_of(index, i) - 8;
        put_u64(m + CHECKSUM_AT, xxh3(m + 8, (size_t)length));
    }
}

/* stamp(blob, index, base_offset, timestamp, randoms): offsets, timestamp, ids where 0
 * (from randoms, 2 u64 per message), then checksums, in place in the writable blob. */
static PyObject *stamp(PyObject *self, PyObject *args) {
    Py_buffer blob, index, randoms;
    unsigned long long base, timestamp;
    if (xxh3 == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "bind() was not called");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "w*y*KKy*", &blob, &index, &base, &timestamp, &randoms))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = index.len / INDEX_ENTRY_BYTES;
    if (index.len % INDEX_ENTRY_BYTES || randoms.len != n * 16) {
        PyErr_SetString(PyExc_ValueError, "index of whole entries, randoms of 16 bytes each");
    } else if (check_layout(index.buf, n, blob.len) == 0) {
        Py_BEGIN_ALLOW_THREADS
        stamp_batch(index.buf, n, blob.buf, base, timestamp, randoms.buf);
        Py_END_ALLOW_THREADS
        result = Py_None;
        Py_INCREF(result);
    }
    PyBuffer_Release(&blob);
    PyBuffer_Release(&index);
    PyBuffer_Release(&randoms);
    return result;
}

enum { HB_OK, HB_KIND_ZERO, HB_TRUNCATED, HB_FIELD_LENGTH, HB_ODD_FIELDS, HB_UNKNOWN_KIND,
       HB_FIXED_SIZE };
#define TLV_HEAD_BYTES 5

/* The structure of one block: every field's kind byte non-zero, its length 1..max_field and
 * inside the block, an even number of fields. */
static int block_structure(const unsigned char *p, int64_t at, int64_t end, uint32_t max_field) {
    int64_t fields = 0;
    while (at < end) {
        if (p[at] == 0) return HB_KIND_ZERO;
        if (at + TLV_HEAD_BYTES > end) return HB_TRUNCATED;
        uint32_t length = u32_at((const char *)p + at + 1);
        if (length < 1 || length > max_field) return HB_FIELD_LENGTH;
        if (at + TLV_HEAD_BYTES + (int64_t)length > end) return HB_TRUNCATED;
        at += TLV_HEAD_BYTES + length;
        fields++;
    }
    return fields % 2 ? HB_ODD_FIELDS : HB_OK;
}

/* The kinds of a structurally sound block: none above max_kind, fixed sizes kept. */
static int block_kinds(const unsigned char *p, int64_t at, int64_t end, const int64_t *fixed,
                       int max_kind, int *is_key) {
    for (int64_t field = 0; at < end; field++) {
        int kind = p[at];
        uint32_t length = u32_at((const char *)p + at + 1);
        *is_key = field % 2 == 0;
        if (kind > max_kind) return HB_UNKNOWN_KIND;
        if (fixed[kind] && fixed[kind] != (int64_t)length) return HB_FIXED_SIZE;
        at += TLV_HEAD_BYTES + length;
    }
    return HB_OK;
}

static PyObject *header_blocks(PyObject *self, PyObject *args) {
    Py_buffer blob, begins, ends, fixed;
    int max_kind;
    unsigned int max_field;
    if (!PyArg_ParseTuple(args, "y*y*y*y*iI", &blob, &begins, &ends, &fixed, &max_kind,
                          &max_field))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = begins.len / 8;
    if (begins.len % 8 || ends.len != begins.len || fixed.len != 256 * 8 || max_kind > 255) {
        PyErr_SetString(PyExc_ValueError,
                        "begins and ends: 8-byte arrays of one length; fixed: 256 int64");
    } else if (check_ranges(begins.buf, ends.buf, n, blob.len) == 0) {
        const unsigned char *p = blob.buf;
        const int64_t *b = begins.buf, *e = ends.buf;
        int fault = HB_OK, is_key = 0;
        Py_ssize_t i = 0;
        Py_BEGIN_ALLOW_THREADS
        for (; i < n && fault == HB_OK; i++) {
            fault = block_structure(p, b[i], e[i], max_field);
            if (fault == HB_OK) fault = block_kinds(p, b[i], e[i], fixed.buf, max_kind, &is_key);
        }
        Py_END_ALLOW_THREADS
        if (fault == HB_OK) {
            result = Py_None;
            Py_INCREF(result);
        } else {
            result = Py_BuildValue("(nii)", i - 1, fault, is_key);
        }
    }
    PyBuffer_Release(&blob);
    PyBuffer_Release(&begins);
    PyBuffer_Release(&ends);
    PyBuffer_Release(&fixed);
    return result;
}

static PyMethodDef methods[] = {
    {"bind", bind, METH_O,
     "bind(path) -> the symbol bound: XXH3_64bits(_dispatch) in the xxhash extension at path"},
    {"xxh3_ranges", xxh3_ranges, METH_VARARGS, "xxh3_ranges(blob, starts, ends, out)"},
    {"scan", scan, METH_VARARGS, "scan(index, blob, max_payload, max_user_headers)"},
    {"stamp", stamp, METH_VARARGS, "stamp(blob, index, base_offset, timestamp, randoms)"},
    {"header_blocks", header_blocks, METH_VARARGS,
     "header_blocks(blob, begins, ends, fixed, max_kind, max_field) -> None or (block, fault, is_key)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_batchhash", NULL, -1, methods};

PyMODINIT_FUNC PyInit__batchhash(void) { return PyModule_Create(&module); }
