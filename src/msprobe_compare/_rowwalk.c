/* Native twin of load/rows.py's _Builder walk: one dump.json entry (already parsed) -> rows.
 *
 * A Walker appends the rows of an entry to the builder's own columns: the Python lists (names, dtype, shape,
 * md5, data_name, entries) directly, the numeric columns (array.array) through C buffers flushed with
 * frombytes(). It handles the common leaves (tensors with numeric statistics, plain scalars, torch.Size, nulls);
 * on anything else (an unusual leaf, an invalid value that deserves an error message, deep nesting) it undoes
 * what it added for the entry and returns False, and the Python walk handles that entry. Results are identical
 * to the Python walk's (tests/load/test_rowwalk.py runs both on every fixture and on generated entries).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { K_NUMBER = 0, K_INT = 1, K_NAN = 2, K_NONE = 3, K_RAW = 4 };
enum { S_INPUT = 0, S_PARAMETERS = 1, S_OUTPUT = 2, S_PARAMETERS_GRAD = 3 };
enum { RG_MISSING = -1, RG_FALSE = 0, RG_TRUE = 1 };
#define MAX_DEPTH 400
#define OK 0
#define FALLBACK 1
#define FAIL (-1)

/* ---- growable byte buffers ------------------------------------------------------------------------------- */
typedef struct {
    char *p;
    Py_ssize_t len, cap;
} Buf;

static int buf_reserve(Buf *b, Py_ssize_t extra) {
    if (b->len + extra <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra) cap *= 2;
    char *p = PyMem_Realloc(b->p, (size_t)cap);
    if (!p) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static int buf_put(Buf *b, const void *src, Py_ssize_t n) {
    if (buf_reserve(b, n) < 0) return -1;
    memcpy(b->p + b->len, src, (size_t)n);
    b->len += n;
    return 0;
}

/* ---- CRC-32 (zlib's polynomial), for the checksum text of scalars ------------------------------------------- */
static uint32_t crc_table[256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

static uint32_t crc32_bytes(const char *s, Py_ssize_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (Py_ssize_t i = 0; i < n; i++) c = crc_table[(c ^ (unsigned char)s[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* ---- interned constants --------------------------------------------------------------------------------- */
static PyObject *s_type, *s_dtype, *s_shape, *s_max, *s_min, *s_mean, *s_norm, *s_requires_grad, *s_md5,
    *s_data_name, *s_class_type, *s_value, *s_none_text, *s_minus1, *s_empty_list, *s_torch_size, *s_slice,
    *s_ellipsis, *s_process_group, *s_frombytes, *s_group_ranks;
static PyObject *s_class_none, *s_class_bool, *s_class_int, *s_class_float, *s_class_str, *s_class_list,
    *s_class_dict;

static const struct {
    const char *key, *suffix;
    int state;
} FIELDS[] = {
    {"input_args", ".input", S_INPUT},   {"input_kwargs", ".input", S_INPUT}, {"input", ".input", S_INPUT},
    {"parameters", ".parameters", S_PARAMETERS}, {"output", ".output", S_OUTPUT},
};
#define N_FIELDS 5
static PyObject *field_keys[N_FIELDS];

/* ---- the walker ------------------------------------------------------------------------------------------ */
typedef struct {
    PyObject_HEAD
    PyObject *names, *dtype, *shape, *md5, *data_name, *entries; /* lists, appended directly */
    PyObject *arrays[5];  /* array.array: entry_index (i), state (b), stats (d), kinds (b), rg (b) */
    PyObject *raw_rows;   /* dict row -> value (RawCells._rows) */
    PyObject *strings;    /* intern dict shared with the Python builder */
    Py_ssize_t intern_limit;
    int has_md5;
    Buf bufs[5];          /* pending numeric cells, same order as arrays */
    Buf name;             /* the current row name, UTF-8 */
    PyObject *pending_raw; /* list of (row, value) of the current entry */
    PyObject *cells_type;  /* rows._Cells: four cells of which only some are raw */
    PyObject *absent;      /* rows._ABSENT: a cell of _Cells that is not raw */
    int32_t entry;        /* index of the current entry */
} Walker;

enum { A_ENTRY = 0, A_STATE = 1, A_STATS = 2, A_KINDS = 3, A_RG = 4 };

static void Walker_dealloc(Walker *w) {
    Py_XDECREF(w->names);
    Py_XDECREF(w->dtype);
    Py_XDECREF(w->shape);
    Py_XDECREF(w->md5);
    Py_XDECREF(w->data_name);
    Py_XDECREF(w->entries);
    for (int i = 0; i < 5; i++) {
        Py_XDECREF(w->arrays[i]);
        PyMem_Free(w->bufs[i].p);
    }
    Py_XDECREF(w->raw_rows);
    Py_XDECREF(w->strings);
    Py_XDECREF(w->pending_raw);
    Py_XDECREF(w->cells_type);
    Py_XDECREF(w->absent);
    PyMem_Free(w->name.p);
    Py_TYPE(w)->tp_free((PyObject *)w);
}

static int Walker_init(Walker *w, PyObject *args, PyObject *kwds) {
    PyObject *names, *dtype, *shape, *md5, *data_name, *entries, *a0, *a1, *a2, *a3, *a4, *raw_rows, *strings;
    PyObject *cells_type, *absent;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O!OOOOOO!O!nOO", &PyList_Type, &names, &PyList_Type, &dtype, &PyList_Type,
                          &shape, &PyList_Type, &md5, &PyList_Type, &data_name, &PyList_Type, &entries, &a0, &a1,
                          &a2, &a3, &a4, &PyDict_Type, &raw_rows, &PyDict_Type, &strings, &limit, &cells_type, &absent))
        return -1;
    Py_INCREF(cells_type);
    Py_INCREF(absent);
    w->cells_type = cells_type;
    w->absent = absent;
    PyObject *objs[] = {names, dtype, shape, md5, data_name, entries, a0, a1, a2, a3, a4, raw_rows, strings};
    for (int i = 0; i < 13; i++) Py_INCREF(objs[i]);
    w->names = names;
    w->dtype = dtype;
    w->shape = shape;
    w->md5 = md5;
    w->data_name = data_name;
    w->entries = entries;
    w->arrays[0] = a0;
    w->arrays[1] = a1;
    w->arrays[2] = a2;
    w->arrays[3] = a3;
    w->arrays[4] = a4;
    w->raw_rows = raw_rows;
    w->strings = strings;
    w->intern_limit = limit;
    w->pending_raw = PyList_New(0);
    return w->pending_raw ? 0 : -1;
}

/* One shared object per distinct dtype/shape text, as _Builder.intern. Returns a new reference. */
static PyObject *intern_text(Walker *w, PyObject *text) {
    PyObject *shared = PyDict_GetItemWithError(w->strings, text);
    if (shared) {
        Py_INCREF(shared);
        return shared;
    }
    if (PyErr_Occurred()) return NULL;
    if (PyDict_GET_SIZE(w->strings) < w->intern_limit && PyDict_SetItem(w->strings, text, text) < 0) return NULL;
    Py_INCREF(text);
    return text;
}

static PyObject *name_object(Walker *w) { return PyUnicode_DecodeUTF8(w->name.p, w->name.len, "strict"); }

/* Decimal text of v into out (at least 21 bytes); returns its length. */
static int format_int(char *out, long long v) {
    char tmp[24];
    int n = 0;
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    int k = 0;
    if (v < 0) out[k++] = '-';
    while (n) out[k++] = tmp[--n];
    return k;
}

static int name_push_text(Walker *w, const char *s, Py_ssize_t n) {
    if (buf_reserve(&w->name, n + 1) < 0) return -1;
    w->name.p[w->name.len++] = '.';
    memcpy(w->name.p + w->name.len, s, (size_t)n);
    w->name.len += n;
    return 0;
}

/* Append one row. `name`, `dtype`, `shape`, `md5`, `data_name` are borrowed (md5 may be Py_None). */
static int add_row(Walker *w, PyObject *name, int state, PyObject *dtype, PyObject *shape, const double nums[4],
                   const int8_t kinds[4], int rg, PyObject *md5, PyObject *data_name) {
    int32_t entry = w->entry;
    int8_t st = (int8_t)state, r = (int8_t)rg;
    if (buf_put(&w->bufs[A_ENTRY], &entry, 4) < 0 || buf_put(&w->bufs[A_STATE], &st, 1) < 0 ||
        buf_put(&w->bufs[A_STATS], nums, 32) < 0 || buf_put(&w->bufs[A_KINDS], kinds, 4) < 0 ||
        buf_put(&w->bufs[A_RG], &r, 1) < 0)
        return FAIL;
    PyObject *d = intern_text(w, dtype);
    if (!d) return FAIL;
    PyObject *s = intern_text(w, shape);
    if (!s) {
        Py_DECREF(d);
        return FAIL;
    }
    int bad = PyList_Append(w->names, name) < 0 || PyList_Append(w->dtype, d) < 0 ||
              PyList_Append(w->shape, s) < 0 || PyList_Append(w->md5, md5) < 0 ||
              PyList_Append(w->data_name, data_name) < 0;
    Py_DECREF(d);
    Py_DECREF(s);
    return bad ? FAIL : OK;
}

/* str() of a shape list: "[a, b]" for 64-bit ints, str() of the list otherwise. New reference. */
static PyObject *shape_text(PyObject *shape) {
    Py_ssize_t n = PyList_GET_SIZE(shape);
    if (n == 0) {
        Py_INCREF(s_empty_list);
        return s_empty_list;
    }
    char small[512];
    if (n <= 20) {
        Py_ssize_t pos = 0;
        small[pos++] = '[';
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *item = PyList_GET_ITEM(shape, i);
            if (!PyLong_CheckExact(item)) goto general;
            int overflow = 0;
            long long v = PyLong_AsLongLongAndOverflow(item, &overflow);
            if (overflow || (v == -1 && PyErr_Occurred())) {
                PyErr_Clear();
                goto general;
            }
            if (i) {
                small[pos++] = ',';
                small[pos++] = ' ';
            }
            pos += format_int(small + pos, v);
        }
        small[pos++] = ']';
        return PyUnicode_FromStringAndSize(small, pos);
    }
general:
    return PyObject_Str(shape);
}

/* A raw value for pending_raw: the one object when all four cells hold it, else _Cells with _ABSENT gaps. */
static int queue_raw(Walker *w, PyObject *cells[4]) {
    PyObject *value;
    if (cells[0] && cells[1] == cells[0] && cells[2] == cells[0] && cells[3] == cells[0]) {
        Py_INCREF(cells[0]);
        value = cells[0];
    } else {
        PyObject *tuple = PyTuple_New(4);
        if (!tuple) return FAIL;
        for (int c = 0; c < 4; c++) {
            PyObject *v = cells[c] ? cells[c] : w->absent;
            Py_INCREF(v);
            PyTuple_SET_ITEM(tuple, c, v);
        }
        value = PyObject_CallOneArg(w->cells_type, tuple);
        Py_DECREF(tuple);
        if (!value) return FAIL;
    }
    PyObject *pair = Py_BuildValue("(nN)", PyList_GET_SIZE(w->names), value);
    if (!pair) return FAIL;
    int bad = PyList_Append(w->pending_raw, pair) < 0;
    Py_DECREF(pair);
    return bad ? FAIL : OK;
}

/* The four statistic cells of a tensor leaf; FALLBACK for anything but null/float/int/bool. */
static int tensor_stats(Walker *w, PyObject *leaf, double nums[4], int8_t kinds[4]) {
    PyObject *keys[4] = {s_max, s_min, s_mean, s_norm};
    PyObject *raw[4] = {NULL, NULL, NULL, NULL};
    int any_raw = 0;
    for (int col = 0; col < 4; col++) {
        PyObject *v = PyDict_GetItemWithError(leaf, keys[col]);
        if (!v && PyErr_Occurred()) return FAIL;
        nums[col] = 0.0;
        if (!v || v == Py_None) {
            kinds[col] = K_NONE;
        } else if (PyFloat_CheckExact(v)) {
            double x = PyFloat_AS_DOUBLE(v);
            if (x != x) {
                kinds[col] = K_NAN;
            } else {
                nums[col] = x;
                kinds[col] = K_NUMBER;
            }
        } else if (PyLong_CheckExact(v)) {
            double x = PyLong_AsDouble(v);
            if (x == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();
                return FALLBACK;
            }
            nums[col] = x;
            kinds[col] = K_INT;
        } else if (PyBool_Check(v)) {
            kinds[col] = K_RAW;
            raw[col] = v;
            any_raw = 1;
        } else {
            return FALLBACK; /* an invalid value: the Python walk reports it */
        }
    }
    return any_raw ? queue_raw(w, raw) : OK;
}

static int ends_with(const char *s, Py_ssize_t n, const char *suffix) {
    Py_ssize_t k = (Py_ssize_t)strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, (size_t)k) == 0;
}

static PyObject *class_text(PyObject *value) {
    if (value == Py_None) return s_class_none;
    if (PyBool_Check(value)) return s_class_bool;
    if (PyLong_CheckExact(value)) return s_class_int;
    if (PyFloat_CheckExact(value)) return s_class_float;
    if (PyUnicode_CheckExact(value)) return s_class_str;
    if (PyList_CheckExact(value)) return s_class_list;
    if (PyDict_CheckExact(value)) return s_class_dict;
    return NULL;
}

/* CRC-32 text of str(value) ('' for None), as rows._crc_text. New reference, or NULL with FALLBACK in *status. */
static PyObject *crc_text(PyObject *value, int *status) {
    uint32_t c = 0;
    if (value != Py_None) {
        PyObject *text = PyObject_Str(value);
        if (!text) {
            *status = FAIL;
            return NULL;
        }
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(text, &n);
        if (!s) { /* lone surrogates: the Python walk raises its own error */
            PyErr_Clear();
            Py_DECREF(text);
            *status = FALLBACK;
            return NULL;
        }
        c = crc32_bytes(s, n);
        Py_DECREF(text);
    }
    static const char digits[] = "0123456789abcdef";
    char hex[8];
    for (int k = 7; k >= 0; k--, c >>= 4) hex[k] = digits[c & 0xF];
    return PyUnicode_FromStringAndSize(hex, 8);
}

static int scalar_leaf(Walker *w, PyObject *name, int state, PyObject *leaf, PyObject *md5, PyObject *data_name) {
    PyObject *kind = PyDict_GetItemWithError(leaf, s_type); /* a str: checked by the caller */
    if (!kind) return PyErr_Occurred() ? FAIL : FALLBACK;
    PyObject *value = PyDict_GetItemWithError(leaf, s_value);
    if (!value) {
        if (PyErr_Occurred()) return FAIL;
        value = Py_None;
    }
    double nums[4] = {0.0, 0.0, 0.0, 0.0};
    int8_t kinds[4] = {K_NONE, K_NONE, K_NONE, K_NONE};
    PyObject *dtype, *shape = NULL, *stat = Py_None, *owned_stat = NULL;
    int eq = PyUnicode_Compare(kind, s_torch_size);
    if (eq == -1 && PyErr_Occurred()) return FAIL;
    int by_text = 0; /* src/dst and process groups: the statistic is a text, which is also the md5 if none */
    if (eq == 0) {
        dtype = s_torch_size;
        shape = PyObject_Str(value);
        if (!shape) return FAIL;
    } else {
        if (PyUnicode_Compare(kind, s_slice) == 0 || PyUnicode_Compare(kind, s_ellipsis) == 0) return FALLBACK;
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(name, &n);
        if (!s) return FAIL;
        if (ends_with(s, n, ".src") || ends_with(s, n, ".dst") || ends_with(s, n, ".group_src") ||
            ends_with(s, n, ".group_dst")) {
            dtype = kind;
            owned_stat = PyObject_Str(value);
            by_text = 1;
        } else if (PyUnicode_Compare(kind, s_process_group) == 0) {
            PyObject *ranks = PyDict_GetItemWithError(leaf, s_group_ranks);
            if (!ranks && PyErr_Occurred()) return FAIL;
            dtype = s_process_group;
            owned_stat = PyObject_Str(ranks ? ranks : Py_None);
            by_text = 1;
        } else {
            dtype = class_text(value);
            if (!dtype) return FALLBACK;
            stat = value;
        }
        if (by_text) {
            if (!owned_stat) return FAIL;
            stat = owned_stat;
            int truthy = PyObject_IsTrue(md5);
            if (truthy < 0) {
                Py_DECREF(owned_stat);
                return FAIL;
            }
            if (!truthy) md5 = owned_stat; /* `md5 or stat` */
        }
        Py_INCREF(s_empty_list);
        shape = s_empty_list;
    }
    int status = OK;
    PyObject *crc = NULL;
    if (md5 == Py_None) {
        crc = crc_text(value, &status);
        if (!crc) {
            Py_DECREF(shape);
            Py_XDECREF(owned_stat);
            return status;
        }
        md5 = crc;
    }
    int raw = 0;
    if (stat == Py_None) {
        /* four None cells */
    } else if (PyFloat_CheckExact(stat)) {
        double x = PyFloat_AS_DOUBLE(stat);
        for (int c = 0; c < 4; c++) {
            nums[c] = x != x ? 0.0 : x;
            kinds[c] = x != x ? K_NAN : K_NUMBER;
        }
    } else if (PyLong_CheckExact(stat)) {
        double x = PyLong_AsDouble(stat);
        if (x == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            status = FALLBACK;
        }
        for (int c = 0; c < 4; c++) {
            nums[c] = x;
            kinds[c] = K_INT;
        }
    } else {
        raw = 1;
        for (int c = 0; c < 4; c++) kinds[c] = K_RAW;
    }
    if (status == OK && raw) {
        PyObject *cells[4] = {stat, stat, stat, stat};
        status = queue_raw(w, cells);
    }
    if (status == OK) status = add_row(w, name, state, dtype, shape, nums, kinds, RG_MISSING, md5, data_name);
    Py_XDECREF(crc);
    Py_XDECREF(owned_stat);
    Py_DECREF(shape);
    return status;
}

/* A leaf: a dict whose "type" is a str. The row name is the current name unless data_name overrides it. */
static int leaf(Walker *w, PyObject *node, int state) {
    if (PyDict_Contains(node, s_class_type)) return FALLBACK; /* P2POp and friends */
    PyObject *dn = PyDict_GetItemWithError(node, s_data_name);
    if (!dn && PyErr_Occurred()) return FAIL;
    PyObject *name, *data_name = s_minus1;
    if (dn && PyUnicode_Check(dn) && PyUnicode_GET_LENGTH(dn) > 0 && PyUnicode_Compare(dn, s_minus1) != 0) {
        data_name = dn;
        Py_ssize_t dot = PyUnicode_FindChar(dn, '.', 0, PyUnicode_GET_LENGTH(dn), -1);
        if (dot == -2) return FAIL;
        if (dot >= 0) {
            name = PyUnicode_Substring(dn, 0, dot);
        } else {
            Py_INCREF(dn);
            name = dn;
        }
    } else {
        name = name_object(w);
    }
    if (!name) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            return FALLBACK;
        }
        return FAIL;
    }
    int status;
    PyObject *dtype = PyDict_GetItemWithError(node, s_dtype);
    PyObject *md5 = dtype || !PyErr_Occurred() ? PyDict_GetItemWithError(node, s_md5) : NULL;
    if (PyErr_Occurred()) {
        status = FAIL;
    } else if (md5 && md5 != Py_None && !PyUnicode_Check(md5)) {
        status = FALLBACK; /* an error message from the Python walk */
    } else if (!dtype || dtype == Py_None) {
        status = scalar_leaf(w, name, state, node, md5 ? md5 : Py_None, data_name);
    } else if (!PyUnicode_Check(dtype)) {
        status = FALLBACK;
    } else {
        status = OK;
        PyObject *shape = PyDict_GetItemWithError(node, s_shape), *text = NULL;
        if (!shape && PyErr_Occurred()) {
            status = FAIL;
        } else if (!shape || shape == Py_None) {
            text = s_none_text;
            Py_INCREF(text);
        } else if (PyList_Check(shape)) {
            text = shape_text(shape);
            if (!text) status = FAIL;
        } else {
            status = FALLBACK;
        }
        int rg = RG_MISSING;
        if (status == OK) {
            PyObject *r = PyDict_GetItemWithError(node, s_requires_grad);
            if (!r && PyErr_Occurred())
                status = FAIL;
            else if (r == Py_True)
                rg = RG_TRUE;
            else if (r == Py_False)
                rg = RG_FALSE;
            else if (r && r != Py_None)
                status = FALLBACK;
        }
        double nums[4];
        int8_t kinds[4];
        if (status == OK) status = tensor_stats(w, node, nums, kinds);
        if (status == OK)
            status = add_row(w, name, state, dtype, text, nums, kinds, rg, md5 ? md5 : Py_None, data_name);
        Py_XDECREF(text);
    }
    Py_DECREF(name);
    return status;
}

static int null_row(Walker *w, int state) {
    static const double zeros[4] = {0.0, 0.0, 0.0, 0.0};
    static const int8_t none[4] = {K_NONE, K_NONE, K_NONE, K_NONE};
    PyObject *name = name_object(w);
    if (!name) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            return FALLBACK;
        }
        return FAIL;
    }
    int status = add_row(w, name, state, s_none_text, s_none_text, zeros, none, RG_MISSING, Py_None, s_minus1);
    Py_DECREF(name);
    return status;
}

static int is_leaf_dict(PyObject *node, int *status) {
    PyObject *t = PyDict_GetItemWithError(node, s_type);
    if (!t && PyErr_Occurred()) {
        *status = FAIL;
        return 0;
    }
    if (t && PyUnicode_Check(t)) return 1;
    int has = PyDict_Contains(node, s_class_type);
    if (has < 0) *status = FAIL;
    return has > 0;
}

static int walk(Walker *w, PyObject *node, int state, int depth, int index_lists) {
    if (depth >= MAX_DEPTH - 1) return FALLBACK; /* the Python walk applies the depth limit */
    if (node == Py_None) return null_row(w, state);
    Py_ssize_t mark = w->name.len;
    int status = OK;
    if (PyList_Check(node)) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(node) && status == OK; i++) {
            PyObject *item = PyList_GET_ITEM(node, i);
            if (index_lists) {
                char digits[24];
                int k = format_int(digits, (long long)i);
                if (name_push_text(w, digits, k) < 0) return FAIL;
            }
            Py_INCREF(item);
            if (PyDict_Check(item)) {
                int st = OK;
                int is_leaf = is_leaf_dict(item, &st);
                status = st != OK ? st : is_leaf ? leaf(w, item, state) : walk(w, item, state, depth + 1, 1);
            } else {
                status = walk(w, item, state, depth + 1, 1);
            }
            Py_DECREF(item);
            w->name.len = mark;
        }
        return status;
    }
    if (PyDict_Check(node)) {
        int st = OK;
        int is_leaf = is_leaf_dict(node, &st);
        if (st != OK) return st;
        if (is_leaf) return leaf(w, node, state);
        Py_ssize_t pos = 0;
        PyObject *key, *item;
        while (status == OK && PyDict_Next(node, &pos, &key, &item)) {
            if (!PyUnicode_Check(key)) return FALLBACK;
            Py_ssize_t n;
            const char *s = PyUnicode_AsUTF8AndSize(key, &n);
            if (!s) {
                PyErr_Clear();
                return FALLBACK;
            }
            if (name_push_text(w, s, n) < 0) return FAIL;
            Py_INCREF(item);
            status = walk(w, item, state, depth + 1, 1);
            Py_DECREF(item);
            w->name.len = mark;
        }
        return status;
    }
    return FALLBACK; /* a number or string where an argument description belongs: the Python walk reports it */
}

static int body_has_md5(PyObject *body, int *status) {
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(body, &pos, &key, &value)) {
        if (PyList_Check(value)) {
            for (Py_ssize_t i = 0; i < PyList_GET_SIZE(value); i++) {
                PyObject *x = PyList_GET_ITEM(value, i);
                if (PyDict_Check(x)) {
                    int has = PyDict_Contains(x, s_md5);
                    if (has < 0) *status = FAIL;
                    if (has) return 1;
                }
            }
        } else if (PyDict_Check(value)) {
            int has = PyDict_Contains(value, s_md5);
            if (has < 0) *status = FAIL;
            if (has) return 1;
        }
    }
    return 0;
}

static int set_name(Walker *w, const char *s, Py_ssize_t n) {
    w->name.len = 0;
    return buf_put(&w->name, s, n);
}

static int walk_entry(Walker *w, PyObject *op, PyObject *body) {
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(op, &n);
    if (!s) {
        PyErr_Clear();
        return FALLBACK;
    }
    const char *dot = NULL;
    for (Py_ssize_t i = n - 1; i >= 0; i--)
        if (s[i] == '.') {
            dot = s + i;
            break;
        }
    const char *last = dot ? dot + 1 : s;
    Py_ssize_t last_n = n - (last - s);
    if (last_n == 5 && memcmp(last, "debug", 5) == 0) return FALLBACK;
    int status = OK;
    if (last_n == 15 && memcmp(last, "parameters_grad", 15) == 0) {
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (status == OK && PyDict_Next(body, &pos, &key, &value)) {
            if (!PyUnicode_Check(key)) return FALLBACK;
            Py_ssize_t kn;
            const char *ks = PyUnicode_AsUTF8AndSize(key, &kn);
            if (!ks) {
                PyErr_Clear();
                return FALLBACK;
            }
            if (set_name(w, s, n) < 0 || name_push_text(w, ks, kn) < 0) return FAIL;
            Py_INCREF(value);
            status = walk(w, value, S_PARAMETERS_GRAD, 1, 0);
            Py_DECREF(value);
        }
        return status;
    }
    for (int f = 0; f < N_FIELDS && status == OK; f++) {
        PyObject *value = PyDict_GetItemWithError(body, field_keys[f]);
        if (!value) {
            if (PyErr_Occurred()) return FAIL;
            continue;
        }
        const char *suffix = FIELDS[f].suffix;
        if (set_name(w, s, n) < 0 || buf_put(&w->name, suffix, (Py_ssize_t)strlen(suffix)) < 0) return FAIL;
        Py_INCREF(value);
        status = walk(w, value, FIELDS[f].state, 1, 1);
        Py_DECREF(value);
    }
    return status;
}

static int truncate_list(PyObject *list, Py_ssize_t n) {
    return PyList_GET_SIZE(list) > n ? PyList_SetSlice(list, n, PyList_GET_SIZE(list), NULL) : 0;
}

static PyObject *Walker_entry(Walker *w, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "entry(op, body)");
        return NULL;
    }
    PyObject *op = args[0], *body = args[1];
    if (!PyUnicode_Check(op) || !PyDict_Check(body)) Py_RETURN_FALSE;
    Py_ssize_t rows = PyList_GET_SIZE(w->names);
    Py_ssize_t marks[5];
    for (int i = 0; i < 5; i++) marks[i] = w->bufs[i].len;
    w->entry = (int32_t)PyList_GET_SIZE(w->entries);
    int status = walk_entry(w, op, body);
    int has = 0;
    if (status == OK && !w->has_md5) has = body_has_md5(body, &status);
    if (status == OK && PyList_Append(w->entries, op) < 0) status = FAIL;
    for (Py_ssize_t i = 0; status == OK && i < PyList_GET_SIZE(w->pending_raw); i++) {
        PyObject *pair = PyList_GET_ITEM(w->pending_raw, i);
        if (PyDict_SetItem(w->raw_rows, PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1)) < 0) status = FAIL;
    }
    if (status == OK) {
        if (has) w->has_md5 = 1;
        if (truncate_list(w->pending_raw, 0) < 0) return NULL;
        Py_RETURN_TRUE;
    }
    /* undo this entry's rows (a failed commit of raw cells cannot leave a partial entry either) */
    PyObject *err_type, *err_value, *err_tb;
    PyErr_Fetch(&err_type, &err_value, &err_tb);
    for (int i = 0; i < 5; i++) w->bufs[i].len = marks[i];
    int bad = truncate_list(w->names, rows) < 0 || truncate_list(w->dtype, rows) < 0 ||
              truncate_list(w->shape, rows) < 0 || truncate_list(w->md5, rows) < 0 ||
              truncate_list(w->data_name, rows) < 0 || truncate_list(w->entries, w->entry) < 0;
    for (Py_ssize_t i = 0; !bad && i < PyList_GET_SIZE(w->pending_raw); i++) {
        PyObject *row = PyTuple_GET_ITEM(PyList_GET_ITEM(w->pending_raw, i), 0);
        if (PyDict_DelItem(w->raw_rows, row) < 0) PyErr_Clear(); /* not committed yet */
    }
    if (!bad) bad = truncate_list(w->pending_raw, 0) < 0;
    if (bad) {
        Py_XDECREF(err_type);
        Py_XDECREF(err_value);
        Py_XDECREF(err_tb);
        return NULL;
    }
    PyErr_Restore(err_type, err_value, err_tb);
    if (status == FAIL) return NULL;
    Py_RETURN_FALSE;
}

static PyObject *Walker_flush(Walker *w, PyObject *unused) {
    for (int i = 0; i < 5; i++) {
        if (!w->bufs[i].len) continue;
        PyObject *bytes = PyBytes_FromStringAndSize(w->bufs[i].p, w->bufs[i].len);
        if (!bytes) return NULL;
        PyObject *r = PyObject_CallMethodObjArgs(w->arrays[i], s_frombytes, bytes, NULL);
        Py_DECREF(bytes);
        if (!r) return NULL;
        Py_DECREF(r);
        w->bufs[i].len = 0;
    }
    Py_RETURN_NONE;
}

static PyObject *Walker_has_md5(Walker *w, void *closure) { return PyBool_FromLong(w->has_md5); }

static PyMethodDef Walker_methods[] = {
    {"entry", (PyCFunction)(void (*)(void))Walker_entry, METH_FASTCALL,
     "entry(op, body) -> bool: add the entry's rows; False (nothing added) when the Python walk must do it"},
    {"flush", (PyCFunction)Walker_flush, METH_NOARGS, "move pending numeric cells into the builder's arrays"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Walker_getset[] = {
    {"has_md5", (getter)Walker_has_md5, NULL, "some entry walked here has an md5 field (spec 2.7)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject WalkerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "msprobe_compare._rowwalk.Walker",
    .tp_basicsize = sizeof(Walker),
    .tp_dealloc = (destructor)Walker_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Walker(names, dtype, shape, md5, data_name, entries, entry_index, state, stats, kinds, rg, raw_rows, "
              "strings, intern_limit)",
    .tp_methods = Walker_methods,
    .tp_getset = Walker_getset,
    .tp_init = (initproc)Walker_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_rowwalk", "Native walk of dump.json entries.", -1,
                                    NULL};

#define INTERN(var, text)                                                                                          \
    if (!((var) = PyUnicode_InternFromString(text))) return NULL;

PyMODINIT_FUNC PyInit__rowwalk(void) {
    crc_init();
    INTERN(s_type, "type");
    INTERN(s_dtype, "dtype");
    INTERN(s_shape, "shape");
    INTERN(s_max, "Max");
    INTERN(s_min, "Min");
    INTERN(s_mean, "Mean");
    INTERN(s_norm, "Norm");
    INTERN(s_requires_grad, "requires_grad");
    INTERN(s_md5, "md5");
    INTERN(s_data_name, "data_name");
    INTERN(s_class_type, "class_type");
    INTERN(s_value, "value");
    INTERN(s_none_text, "None");
    INTERN(s_minus1, "-1");
    INTERN(s_empty_list, "[]");
    INTERN(s_torch_size, "torch.Size");
    INTERN(s_slice, "slice");
    INTERN(s_ellipsis, "ellipsis");
    INTERN(s_process_group, "torch.ProcessGroup");
    INTERN(s_frombytes, "frombytes");
    INTERN(s_group_ranks, "group_ranks");
    INTERN(s_class_none, "<class 'NoneType'>");
    INTERN(s_class_bool, "<class 'bool'>");
    INTERN(s_class_int, "<class 'int'>");
    INTERN(s_class_float, "<class 'float'>");
    INTERN(s_class_str, "<class 'str'>");
    INTERN(s_class_list, "<class 'list'>");
    INTERN(s_class_dict, "<class 'dict'>");
    for (int f = 0; f < N_FIELDS; f++) INTERN(field_keys[f], FIELDS[f].key);
    if (PyType_Ready(&WalkerType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&WalkerType);
    if (PyModule_AddObject(m, "Walker", (PyObject *)&WalkerType) < 0) {
        Py_DECREF(&WalkerType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
