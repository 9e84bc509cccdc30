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
#include <float.h>

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
    if (n <= 0) return 0; /* nothing to copy: a buffer never used has no memory (memcpy to NULL is undefined) */
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

/* ---- text path: dump.json entries parsed straight from the file's bytes ----------------------------------------
 *
 * Walker.walk(buf, pos, final) (below) reads the members `"name": {body}` of "data" one at a time into a small
 * tree of spans over the bytes, and walks it as `walk_entry` walks parsed objects. It accepts only plain JSON it
 * fully understands: strings of printable ASCII without escapes, numbers of the JSON grammar (and NaN/Infinity,
 * which the dumper writes), no repeated member names. Anything else, or any leaf the native walk leaves to Python,
 * undoes that entry and hands it, alone, to the caller, which parses it as an object.
 */
enum { J_NULL, J_FALSE, J_TRUE, J_INT, J_BIGINT, J_FLOAT, J_STR, J_ARR, J_OBJ };

typedef struct {
    uint8_t kind;
    const char *s; /* literal (numbers) or content (strings) */
    Py_ssize_t n;
    const char *key; /* member name in an object */
    Py_ssize_t key_n;
    int32_t child, next; /* first child, next sibling; -1 for none */
    int64_t ival;        /* J_INT */
    double fval;         /* J_FLOAT */
} JNode;

typedef struct {
    const char *p, *end;
    JNode *v;
    int32_t len, cap;
} Parser;


/* ---- the walker ------------------------------------------------------------------------------------------ */
#define TEXT_SLOTS 256
#define TEXT_SLOT_MAX 48 /* longer texts are not cached */
typedef struct {
    char bytes[TEXT_SLOT_MAX];
    Py_ssize_t n;
    PyObject *obj; /* the object `strings` maps these bytes to (a strong reference), NULL when empty */
} TextSlot;

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
    Buf text;             /* scratch text */
    Parser parser;        /* the span tree of the entry being parsed (reused) */
    TextSlot texts[TEXT_SLOTS]; /* text path: the shared object of recent dtype/shape texts, by their bytes */
    int busy;             /* walk, entry or flush is running (a callback into Python may not re-enter) */
} Walker;

enum { A_ENTRY = 0, A_STATE = 1, A_STATS = 2, A_KINDS = 3, A_RG = 4 };

/* Drop every reference and pending cell: the state of a Walker made by __new__ alone (its buffers keep their memory). */
static int Walker_clear(Walker *w) {
    Py_CLEAR(w->names);
    Py_CLEAR(w->dtype);
    Py_CLEAR(w->shape);
    Py_CLEAR(w->md5);
    Py_CLEAR(w->data_name);
    Py_CLEAR(w->entries);
    for (int i = 0; i < 5; i++) {
        Py_CLEAR(w->arrays[i]);
        w->bufs[i].len = 0;
    }
    Py_CLEAR(w->raw_rows);
    Py_CLEAR(w->strings);
    Py_CLEAR(w->pending_raw);
    Py_CLEAR(w->cells_type);
    Py_CLEAR(w->absent);
    for (int i = 0; i < TEXT_SLOTS; i++) Py_CLEAR(w->texts[i].obj);
    w->name.len = w->text.len = 0;
    w->has_md5 = 0;
    w->entry = 0;
    return 0;
}

static int Walker_traverse(Walker *w, visitproc visit, void *arg) {
    Py_VISIT(w->names);
    Py_VISIT(w->dtype);
    Py_VISIT(w->shape);
    Py_VISIT(w->md5);
    Py_VISIT(w->data_name);
    Py_VISIT(w->entries);
    for (int i = 0; i < 5; i++) Py_VISIT(w->arrays[i]);
    Py_VISIT(w->raw_rows);
    Py_VISIT(w->strings);
    Py_VISIT(w->pending_raw);
    Py_VISIT(w->cells_type);
    Py_VISIT(w->absent);
    for (int i = 0; i < TEXT_SLOTS; i++) Py_VISIT(w->texts[i].obj);
    return 0;
}

static void Walker_dealloc(Walker *w) {
    PyObject_GC_UnTrack(w);
    Walker_clear(w);
    for (int i = 0; i < 5; i++) PyMem_Free(w->bufs[i].p);
    PyMem_Free(w->name.p);
    PyMem_Free(w->text.p);
    PyMem_Free(w->parser.v);
    Py_TYPE(w)->tp_free((PyObject *)w);
}

/* 0 when the walker may run; -1 with an exception when __init__ has not run (or the collector cleared it) or a
 * method of this walker is running (a callback re-entering it). */
static int walker_ready(Walker *w) {
    if (w->busy) {
        PyErr_SetString(PyExc_RuntimeError, "Walker: in use (re-entered from a callback)");
        return -1;
    }
    if (!w->names || !w->pending_raw) {
        PyErr_SetString(PyExc_ValueError, "Walker: not initialised");
        return -1;
    }
    return 0;
}

/* __init__; run again, it starts afresh (the previous references are dropped, unflushed cells with them). */
static int Walker_init(Walker *w, PyObject *args, PyObject *kwds) {
    PyObject *names, *dtype, *shape, *md5, *data_name, *entries, *a0, *a1, *a2, *a3, *a4, *raw_rows, *strings;
    PyObject *cells_type, *absent;
    Py_ssize_t limit;
    if (w->busy) {
        PyErr_SetString(PyExc_RuntimeError, "Walker: in use (re-entered from a callback)");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O!OOOOOO!O!nOO", &PyList_Type, &names, &PyList_Type, &dtype, &PyList_Type,
                          &shape, &PyList_Type, &md5, &PyList_Type, &data_name, &PyList_Type, &entries, &a0, &a1,
                          &a2, &a3, &a4, &PyDict_Type, &raw_rows, &PyDict_Type, &strings, &limit, &cells_type, &absent))
        return -1;
    PyObject *pending = PyList_New(0);
    if (!pending) return -1;
    PyObject *objs[] = {names, dtype, shape, md5, data_name, entries, a0, a1, a2, a3, a4, raw_rows, strings,
                        cells_type, absent};
    for (int i = 0; i < 15; i++) Py_INCREF(objs[i]); /* held before the old references go (they may be these) */
    w->busy = 1; /* dropping the old references may run finalizers */
    Walker_clear(w);
    w->busy = 0;
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
    w->cells_type = cells_type;
    w->absent = absent;
    w->intern_limit = limit;
    w->pending_raw = pending;
    return 0;
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

/* The shared object of the text s[:n] (printable ASCII), as intern_text(str(s[:n])) returns it, from a small cache
 * keyed by the bytes: the few distinct dtype and shape texts of millions of rows are neither decoded nor hashed
 * again. Only objects `strings` holds are cached (past its limit a text is its own object). New reference. */
static PyObject *span_text(Walker *w, const char *s, Py_ssize_t n) {
    TextSlot *slot = NULL;
    if (n <= TEXT_SLOT_MAX) {
        uint32_t h = 2166136261u ^ (uint32_t)n;
        for (Py_ssize_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
        slot = &w->texts[(h ^ (h >> 16)) & (TEXT_SLOTS - 1)];
        if (slot->obj && slot->n == n && memcmp(slot->bytes, s, (size_t)n) == 0) {
            Py_INCREF(slot->obj);
            return slot->obj;
        }
    }
    PyObject *text = PyUnicode_FromStringAndSize(s, n);
    if (!text) return NULL;
    PyObject *shared = intern_text(w, text);
    Py_DECREF(text);
    if (shared && slot && (shared != text || PyDict_GetItemWithError(w->strings, shared) == shared)) {
        PyObject *old = slot->obj;
        Py_INCREF(shared);
        slot->obj = shared;
        Py_XDECREF(old);
        memcpy(slot->bytes, s, (size_t)n);
        slot->n = n;
    }
    if (PyErr_Occurred()) Py_CLEAR(shared);
    return shared;
}

static PyObject *name_object(Walker *w) { return PyUnicode_DecodeUTF8(w->name.p, w->name.len, "strict"); }

/* The current row name on the text path, where it is printable ASCII (names, keys and digits from j_string). */
static PyObject *ascii_name(const char *s, Py_ssize_t n) {
    PyObject *text = PyUnicode_New(n, 127);
    if (text) memcpy(PyUnicode_DATA(text), s, (size_t)n);
    return text;
}

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

/* An entry name ending in `parameters_grad` (8.3.x) or `parameters_grad.<digits>` (26.x counts them). */
static int is_param_grad(const char *s, Py_ssize_t n) {
    Py_ssize_t i = n;
    while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9') i--;
    if (i < n) {
        if (i == 0 || s[i - 1] != '.') return 0;
        i--;
    }
    return i >= 15 && memcmp(s + i - 15, "parameters_grad", 15) == 0 && (i == 15 || s[i - 16] == '.');
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
    if (is_param_grad(s, n)) {
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

typedef struct {
    Py_ssize_t rows, entries, bufs[5];
} Mark;

static void mark_take(Walker *w, Mark *m) {
    m->rows = PyList_GET_SIZE(w->names);
    m->entries = PyList_GET_SIZE(w->entries);
    for (int i = 0; i < 5; i++) m->bufs[i] = w->bufs[i].len;
}

/* Move the pending raw cells into RawCells; OK or FAIL. */
static int commit_raw(Walker *w) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(w->pending_raw); i++) {
        PyObject *pair = PyList_GET_ITEM(w->pending_raw, i);
        if (PyDict_SetItem(w->raw_rows, PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1)) < 0) return FAIL;
    }
    return truncate_list(w->pending_raw, 0) < 0 ? FAIL : OK;
}

/* Undo everything added since the mark (a pending Python error is kept). Returns -1 if undoing failed. */
static int rollback(Walker *w, const Mark *m) {
    PyObject *err_type, *err_value, *err_tb;
    PyErr_Fetch(&err_type, &err_value, &err_tb);
    for (int i = 0; i < 5; i++) w->bufs[i].len = m->bufs[i];
    int bad = truncate_list(w->names, m->rows) < 0 || truncate_list(w->dtype, m->rows) < 0 ||
              truncate_list(w->shape, m->rows) < 0 || truncate_list(w->md5, m->rows) < 0 ||
              truncate_list(w->data_name, m->rows) < 0 || truncate_list(w->entries, m->entries) < 0;
    for (Py_ssize_t i = 0; !bad && i < PyList_GET_SIZE(w->pending_raw); i++) {
        PyObject *row = PyTuple_GET_ITEM(PyList_GET_ITEM(w->pending_raw, i), 0);
        if (PyDict_DelItem(w->raw_rows, row) < 0) PyErr_Clear(); /* not committed yet */
    }
    if (!bad) bad = truncate_list(w->pending_raw, 0) < 0;
    if (bad) {
        Py_XDECREF(err_type);
        Py_XDECREF(err_value);
        Py_XDECREF(err_tb);
        return -1;
    }
    PyErr_Restore(err_type, err_value, err_tb);
    return 0;
}

static PyObject *Walker_entry(Walker *w, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "entry(op, body)");
        return NULL;
    }
    PyObject *op = args[0], *body = args[1];
    if (walker_ready(w) < 0) return NULL;
    if (!PyUnicode_Check(op) || !PyDict_Check(body)) Py_RETURN_FALSE;
    w->busy = 1;
    Mark m;
    mark_take(w, &m);
    w->entry = (int32_t)m.entries;
    int status = walk_entry(w, op, body);
    int has = 0;
    if (status == OK && !w->has_md5) has = body_has_md5(body, &status);
    if (status == OK && PyList_Append(w->entries, op) < 0) status = FAIL;
    if (status == OK) status = commit_raw(w);
    if (status == OK) {
        if (has) w->has_md5 = 1;
        w->busy = 0;
        Py_RETURN_TRUE;
    }
    int undone = rollback(w, &m);
    w->busy = 0;
    if (undone < 0 || status == FAIL) return NULL;
    Py_RETURN_FALSE;
}

static int32_t j_new(Parser *ps, uint8_t kind) {
    if (ps->len == ps->cap) {
        int32_t cap = ps->cap ? ps->cap * 2 : 256;
        JNode *v = PyMem_Realloc(ps->v, sizeof(JNode) * (size_t)cap);
        if (!v) return -2;
        ps->v = v;
        ps->cap = cap;
    }
    JNode *x = &ps->v[ps->len];
    x->kind = kind;
    x->s = x->key = NULL;
    x->n = x->key_n = 0;
    x->child = x->next = -1;
    return ps->len++;
}

static uint8_t is_ws[256], ends_plain[256]; /* JSON whitespace; bytes that end a plain string run */
enum { SK_QUOTE = 1, SK_OPEN = 2, SK_CLOSE = 3 };
static uint8_t skip_class[256], string_class[256]; /* for skip(): brackets and quotes; a string's end or escape */

static void j_tables(void) {
    is_ws[' '] = is_ws['\n'] = is_ws['\r'] = is_ws['\t'] = 1;
    for (int c = 0; c < 256; c++) ends_plain[c] = c == '"' || c == '\\' || c < 0x20 || c >= 0x7f;
    skip_class['"'] = SK_QUOTE;
    skip_class['{'] = skip_class['['] = SK_OPEN;
    skip_class['}'] = skip_class[']'] = SK_CLOSE;
    string_class['"'] = string_class['\\'] = 1;
}

static void j_ws(Parser *ps) {
    const char *p = ps->p, *end = ps->end;
    while (p < end && is_ws[(unsigned char)*p]) p++; /* (runs are short: eight bytes at a time was slower) */
    ps->p = p;
}

/* A string without escapes, of printable ASCII: its content span. 0 on success, -1 when not that. */
static int j_string(Parser *ps, const char **s, Py_ssize_t *n) {
    const char *p = ps->p + 1; /* after the quote */
    const char *q = p, *end = ps->end;
    while (q < end && !ends_plain[(unsigned char)*q]) q++;
    if (q >= end || *q != '"') return -1; /* an escape, a control or non-ASCII byte, or no end */
    *s = p;
    *n = q - p;
    ps->p = q + 1;
    return 0;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* The value of a decimal m * 10^exp10 (m: its significant digits, `sig` of them, at most 19 kept; -0.0 for a
 * negative zero) where it can be computed exactly here; 0 when strtod must decide.
 *
 * Clinger's fast path: at most 15 significant digits and a power of ten up to 22 make one exact integer times or
 * divided by an exact power of ten, so one correctly rounded operation gives the correctly rounded value (what
 * float() gives).
 *
 * 16 to 19 digits (what repr writes for most float32 statistics) and a power of ten up to 27, where long double is
 * the x87 80-bit format: the 64-bit mantissa holds the digits and the power of ten exactly, so one correctly rounded
 * long double operation gives the value rounded to 64 bits. Rounding that to double again is correct unless it lies
 * exactly halfway between two doubles (its low 11 mantissa bits are 0x400): no double's rounding boundary can lie
 * strictly between the value and its nearest 64-bit number. That case and subnormals go to strtod. */
static int decimal_value(uint64_t m, int sig, int exp10, int neg, double *out) {
    static const double pow10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                     1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    if (m == 0) {
        *out = neg ? -0.0 : 0.0;
        return 1;
    }
    if (sig <= 15 && exp10 >= -22 && exp10 <= 22) {
        double x = (double)m;
        x = exp10 < 0 ? x / pow10[-exp10] : x * pow10[exp10];
        *out = neg ? -x : x;
        return 1;
    }
#if defined(__x86_64__) && LDBL_MANT_DIG == 64
    static const long double lpow10[28] = {1e0L,  1e1L,  1e2L,  1e3L,  1e4L,  1e5L,  1e6L,  1e7L,  1e8L,  1e9L,
                                           1e10L, 1e11L, 1e12L, 1e13L, 1e14L, 1e15L, 1e16L, 1e17L, 1e18L, 1e19L,
                                           1e20L, 1e21L, 1e22L, 1e23L, 1e24L, 1e25L, 1e26L, 1e27L};
    if (sig > 19 || exp10 < -27 || exp10 > 27) return 0;
    static volatile long double one = 1.0L, tiny = 0x1p-63L;
    if (one + tiny == one) return 0; /* the x87 rounds to fewer than 64 bits here (its precision control) */
    volatile long double r = exp10 < 0 ? (long double)m / lpow10[-exp10] : (long double)m * lpow10[exp10];
    union {
        long double ld;
        struct {
            uint64_t mant;
            uint16_t sign_exp;
        } bits;
    } u;
    memset(&u, 0, sizeof u);
    u.ld = r;
    if ((u.bits.mant & 0x7FF) == 0x400) return 0; /* halfway between two doubles: strtod decides */
    double x = (double)r;
    if (!(x >= DBL_MIN && x <= DBL_MAX)) return 0;
    *out = neg ? -x : x;
    return 1;
#else
    return 0;
#endif
}

static int32_t j_number(Parser *ps) {
    const char *p = ps->p, *start = p;
    if (p < ps->end && *p == '-') p++;
    if (p + 8 <= ps->end && memcmp(p, "Infinity", 8) == 0) {
        int32_t k = j_new(ps, J_FLOAT);
        if (k < 0) return k;
        ps->v[k].fval = *start == '-' ? -Py_HUGE_VAL : Py_HUGE_VAL;
        ps->v[k].s = start;
        ps->p = p + 8;
        ps->v[k].n = ps->p - start;
        return k;
    }
    if (p >= ps->end || !is_digit(*p)) return -1;
    /* one scan: the extent of the literal and its first 19 significant digits (m), their count and the power of
     * ten of the last one kept */
    uint64_t m = 0;
    int sig = 0, exp10 = 0, big_exp = 0;
    if (*p == '0') {
        p++;
    } else {
        for (; p < ps->end && is_digit(*p); p++) {
            if (++sig <= 19)
                m = m * 10 + (uint64_t)(*p - '0');
            else
                exp10++;
        }
    }
    int is_float = 0;
    if (p < ps->end && *p == '.') {
        p++;
        if (p >= ps->end || !is_digit(*p)) return -1;
        for (; p < ps->end && is_digit(*p); p++) {
            if (sig == 0 && *p == '0') { /* a leading zero is not a significant digit */
                exp10--;
            } else if (++sig <= 19) {
                m = m * 10 + (uint64_t)(*p - '0');
                exp10--;
            }
        }
        is_float = 1;
    }
    if (p < ps->end && (*p == 'e' || *p == 'E')) {
        p++;
        int eneg = 0, e = 0;
        if (p < ps->end && (*p == '+' || *p == '-')) eneg = *p++ == '-';
        if (p >= ps->end || !is_digit(*p)) return -1;
        for (; p < ps->end && is_digit(*p); p++) {
            if (e < 100000) e = e * 10 + (*p - '0');
            else big_exp = 1;
        }
        exp10 += eneg ? -e : e;
        is_float = 1;
    }
    if (p < ps->end && (is_digit(*p) || *p == '.' || *p == 'e' || *p == 'E' || *p == '-' || *p == '+')) return -1;
    Py_ssize_t n = p - start;
    int32_t k;
    if (is_float) {
        double x;
        if (big_exp || !decimal_value(m, sig, exp10, *start == '-', &x)) {
            char tmp[64];
            if (n >= (Py_ssize_t)sizeof(tmp)) return -1;
            memcpy(tmp, start, (size_t)n);
            tmp[n] = 0;
            char *stop = NULL;
            x = strtod(tmp, &stop); /* correctly rounded (glibc); a locale with another decimal point stops early */
            if (stop != tmp + n) return -1;
        }
        k = j_new(ps, J_FLOAT);
        if (k < 0) return k;
        ps->v[k].fval = x;
    } else {
        Py_ssize_t digits = n - (*start == '-');
        if (digits > 18) {
            k = j_new(ps, J_BIGINT);
        } else {
            int64_t v = 0;
            for (const char *q = start + (*start == '-'); q < p; q++) v = v * 10 + (*q - '0');
            k = j_new(ps, J_INT);
            if (k >= 0) ps->v[k].ival = *start == '-' ? -v : v;
        }
        if (k < 0) return k;
    }
    ps->v[k].s = start;
    ps->v[k].n = n;
    ps->p = p;
    return k;
}

/* ---- the repeated-name check of large objects ---------------------------------------------------------------
 * An object's first SMALL_OBJECT member names are checked with a 64-bit filter and, on a filter hit, compared with
 * the members so far; from then on they go into a hash set keyed by CPython's seeded string hash (PEP 456: SipHash,
 * keyed per process), so no choice of names (64,000 of one length, first and last byte, or chosen to collide in
 * any fixed hash) makes the check more than linear. */
#define SMALL_OBJECT 16

typedef struct {
    const char *key; /* NULL: an empty slot (a name's bytes are never at NULL) */
    Py_ssize_t n;
    Py_hash_t h;
} KeySlot;

typedef struct {
    KeySlot *slots;
    size_t mask, used;
} KeySet;

static Py_hash_t (*seeded_hash)(const void *, Py_ssize_t); /* PyHash_GetFuncDef()->hash, set at import */

/* 1: the name is in the set already; 0: added; -2: no memory. */
static int keyset_add(KeySet *set, const char *key, Py_ssize_t n) {
    if (!set->slots || (set->used + 1) * 2 > set->mask + 1) { /* at most half full: grow and rehash */
        size_t cap = set->slots ? (set->mask + 1) * 2 : 4 * SMALL_OBJECT;
        KeySlot *slots = PyMem_Calloc(cap, sizeof(KeySlot));
        if (!slots) return -2;
        for (size_t i = 0; set->slots && i <= set->mask; i++) {
            if (!set->slots[i].key) continue;
            size_t q = (size_t)set->slots[i].h & (cap - 1);
            while (slots[q].key) q = (q + 1) & (cap - 1);
            slots[q] = set->slots[i];
        }
        PyMem_Free(set->slots);
        set->slots = slots;
        set->mask = cap - 1;
    }
    Py_hash_t h = seeded_hash(key, n);
    for (size_t i = (size_t)h & set->mask;; i = (i + 1) & set->mask) {
        KeySlot *slot = &set->slots[i];
        if (!slot->key) {
            slot->key = key;
            slot->n = n;
            slot->h = h;
            set->used++;
            return 0;
        }
        if (slot->h == h && slot->n == n && memcmp(slot->key, key, (size_t)n) == 0) return 1;
    }
}

static int32_t j_value(Parser *ps, int depth);

/* The members (or items) of the container node k whose opening bracket c was read, up to its closing one; k, or -1
 * / -2 as j_value. `set` holds the member names once there are more than SMALL_OBJECT (the caller frees it). */
static int32_t j_members(Parser *ps, int depth, int32_t k, char c, KeySet *set) {
    char close = c == '{' ? '}' : ']';
    int32_t last = -1, members = 0;
    uint64_t names_seen = 0; /* a bit per (length, first and last byte) of the first member names */
    for (;;) {
        const char *key = NULL;
        Py_ssize_t key_n = 0;
        if (c == '{') {
            j_ws(ps);
            if (ps->p >= ps->end || *ps->p != '"' || j_string(ps, &key, &key_n) < 0) return -1;
            if (++members > SMALL_OBJECT) {
                if (!set->slots) { /* the names so far into the set */
                    for (int32_t o = ps->v[k].child; o >= 0; o = ps->v[o].next)
                        if (keyset_add(set, ps->v[o].key, ps->v[o].key_n) == -2) return -2;
                }
                int r = keyset_add(set, key, key_n);
                if (r) return r == 1 ? -1 : -2; /* a repeated name: the general path decides */
            } else {
                uint64_t bit = key_n ? 1ull << (((uint64_t)key_n * 7u + (unsigned char)key[0] * 3u +
                                                 (unsigned char)key[key_n - 1]) & 63u)
                                     : 1ull;
                if (names_seen & bit) { /* perhaps a repeated name: compare with the (few) members so far */
                    for (int32_t o = ps->v[k].child; o >= 0; o = ps->v[o].next)
                        if (ps->v[o].key_n == key_n && memcmp(ps->v[o].key, key, (size_t)key_n) == 0) return -1;
                }
                names_seen |= bit;
            }
            j_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') return -1;
            ps->p++;
        }
        int32_t item = j_value(ps, depth + 1);
        if (item < 0) return item;
        ps->v[item].key = key;
        ps->v[item].key_n = key_n;
        if (last < 0)
            ps->v[k].child = item;
        else
            ps->v[last].next = item;
        last = item;
        j_ws(ps);
        if (ps->p >= ps->end) return -1;
        if (*ps->p == ',') {
            ps->p++;
            continue;
        }
        if (*ps->p == close) {
            ps->p++;
            return k;
        }
        return -1;
    }
}

/* One value; its node index, -1 when the text is not what this parser takes, -2 on memory errors. */
static int32_t j_value(Parser *ps, int depth) {
    if (depth > MAX_DEPTH) return -1;
    j_ws(ps);
    if (ps->p >= ps->end) return -1;
    char c = *ps->p;
    if (c == '{' || c == '[') {
        int32_t k = j_new(ps, c == '{' ? J_OBJ : J_ARR);
        if (k < 0) return k;
        ps->p++;
        j_ws(ps);
        char close = c == '{' ? '}' : ']';
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            return k;
        }
        KeySet set = {NULL, 0, 0};
        int32_t r = j_members(ps, depth, k, c, &set);
        PyMem_Free(set.slots);
        return r;
    }
    if (c == '"') {
        const char *s;
        Py_ssize_t n;
        if (j_string(ps, &s, &n) < 0) return -1;
        int32_t k = j_new(ps, J_STR);
        if (k < 0) return k;
        ps->v[k].s = s;
        ps->v[k].n = n;
        return k;
    }
    static const struct {
        const char *word;
        int len;
        uint8_t kind;
    } words[] = {{"null", 4, J_NULL}, {"true", 4, J_TRUE}, {"false", 5, J_FALSE}, {"NaN", 3, J_FLOAT}};
    for (int i = 0; i < 4; i++) {
        if (c == words[i].word[0]) {
            if (ps->end - ps->p < words[i].len || memcmp(ps->p, words[i].word, (size_t)words[i].len) != 0) return -1;
            int32_t k = j_new(ps, words[i].kind);
            if (k < 0) return k;
            ps->v[k].fval = Py_NAN;
            ps->v[k].s = ps->p;
            ps->v[k].n = words[i].len;
            ps->p += words[i].len;
            return k;
        }
    }
    return j_number(ps);
}

static int32_t j_get(const Parser *ps, int32_t obj, const char *key) {
    Py_ssize_t n = (Py_ssize_t)strlen(key);
    for (int32_t o = ps->v[obj].child; o >= 0; o = ps->v[o].next)
        if (ps->v[o].key_n == n && memcmp(ps->v[o].key, key, (size_t)n) == 0) return o;
    return -1;
}

static int j_is(const Parser *ps, int32_t k, uint8_t kind) { return k >= 0 && ps->v[k].kind == kind; }

static int j_equals(const Parser *ps, int32_t k, const char *text) {
    Py_ssize_t n = (Py_ssize_t)strlen(text);
    return j_is(ps, k, J_STR) && ps->v[k].n == n && memcmp(ps->v[k].s, text, (size_t)n) == 0;
}

static PyObject *j_str(const Parser *ps, int32_t k) { return PyUnicode_FromStringAndSize(ps->v[k].s, ps->v[k].n); }

/* Text of str(value) for a scalar value node into out; FALLBACK for lists, dicts and big ints. */
static int j_text(const Parser *ps, int32_t k, Buf *out) {
    out->len = 0;
    if (k < 0) return buf_put(out, "None", 4) < 0 ? FAIL : OK;
    const JNode *x = &ps->v[k];
    char tmp[24];
    switch (x->kind) {
    case J_NULL:
        return buf_put(out, "None", 4) < 0 ? FAIL : OK;
    case J_TRUE:
        return buf_put(out, "True", 4) < 0 ? FAIL : OK;
    case J_FALSE:
        return buf_put(out, "False", 5) < 0 ? FAIL : OK;
    case J_INT:
        return buf_put(out, tmp, format_int(tmp, (long long)x->ival)) < 0 ? FAIL : OK;
    case J_STR:
        return buf_put(out, x->s, x->n) < 0 ? FAIL : OK;
    case J_FLOAT: {
        char *r = PyOS_double_to_string(x->fval, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
        if (!r) return FAIL;
        int bad = buf_put(out, r, (Py_ssize_t)strlen(r)) < 0;
        PyMem_Free(r);
        return bad ? FAIL : OK;
    }
    default:
        return FALLBACK;
    }
}

/* "[a, b]" for a list of (64-bit) ints, "None" for null/missing; FALLBACK otherwise. New reference in *out. */
static int j_int_list_text(Walker *w, const Parser *ps, int32_t k, PyObject **out) {
    if (k < 0 || ps->v[k].kind == J_NULL) {
        Py_INCREF(s_none_text);
        *out = s_none_text;
        return OK;
    }
    if (ps->v[k].kind != J_ARR) return FALLBACK;
    Buf *b = &w->text;
    b->len = 0;
    if (buf_put(b, "[", 1) < 0) return FAIL;
    char tmp[24];
    for (int32_t c = ps->v[k].child; c >= 0; c = ps->v[c].next) {
        if (ps->v[c].kind != J_INT) return FALLBACK;
        if (c != ps->v[k].child && buf_put(b, ", ", 2) < 0) return FAIL;
        if (buf_put(b, tmp, format_int(tmp, (long long)ps->v[c].ival)) < 0) return FAIL;
    }
    if (buf_put(b, "]", 1) < 0) return FAIL;
    *out = span_text(w, b->p, b->len);
    return *out ? OK : FAIL;
}

/* Statistic cell of a value node: FALLBACK for values a tensor statistic cannot hold here. */
static int j_cell(const Parser *ps, int32_t k, double *num, int8_t *kind, PyObject **raw) {
    *num = 0.0;
    *raw = NULL;
    if (k < 0 || ps->v[k].kind == J_NULL) {
        *kind = K_NONE;
        return OK;
    }
    const JNode *x = &ps->v[k];
    if (x->kind == J_FLOAT) {
        if (x->fval != x->fval) {
            *kind = K_NAN;
        } else {
            *num = x->fval;
            *kind = K_NUMBER;
        }
        return OK;
    }
    if (x->kind == J_INT) {
        *num = (double)x->ival;
        *kind = K_INT;
        return OK;
    }
    if (x->kind == J_TRUE || x->kind == J_FALSE) {
        *kind = K_RAW;
        *raw = x->kind == J_TRUE ? Py_True : Py_False;
        return OK;
    }
    return FALLBACK;
}

static int j_scalar(Walker *w, const Parser *ps, int32_t leaf, PyObject *name, int state, int32_t md5_node,
                    PyObject *data_name) {
    int32_t kind = j_get(ps, leaf, "type"), value = j_get(ps, leaf, "value");
    PyObject *dtype = NULL, *shape = NULL, *stat_text = NULL, *md5 = NULL, *stat_obj = NULL;
    int status = OK, by_text = 0;
    double nums[4] = {0.0, 0.0, 0.0, 0.0};
    int8_t kinds[4] = {K_NONE, K_NONE, K_NONE, K_NONE};
    PyObject *raw = NULL;
    if (j_equals(ps, kind, "torch.Size")) {
        Py_INCREF(s_torch_size);
        dtype = s_torch_size;
        status = j_int_list_text(w, ps, value, &shape);
    } else if (j_equals(ps, kind, "slice") || j_equals(ps, kind, "ellipsis")) {
        return FALLBACK;
    } else {
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(name, &n);
        if (!s) return FAIL;
        Py_INCREF(s_empty_list);
        shape = s_empty_list;
        if (ends_with(s, n, ".src") || ends_with(s, n, ".dst") || ends_with(s, n, ".group_src") ||
            ends_with(s, n, ".group_dst")) {
            dtype = j_str(ps, kind);
            status = dtype ? j_text(ps, value, &w->text) : FAIL;
            if (status == OK) stat_text = PyUnicode_FromStringAndSize(w->text.p, w->text.len);
            by_text = 1;
        } else if (j_equals(ps, kind, "torch.ProcessGroup")) {
            Py_INCREF(s_process_group);
            dtype = s_process_group;
            status = j_int_list_text(w, ps, j_get(ps, leaf, "group_ranks"), &stat_text);
            by_text = 1;
        } else {
            uint8_t vk = value < 0 ? J_NULL : ps->v[value].kind;
            dtype = vk == J_NULL ? s_class_none : vk == J_TRUE || vk == J_FALSE ? s_class_bool
                  : vk == J_INT ? s_class_int : vk == J_FLOAT ? s_class_float : vk == J_STR ? s_class_str : NULL;
            if (!dtype) {
                Py_DECREF(shape);
                return FALLBACK;
            }
            Py_INCREF(dtype);
            if (vk == J_STR) {
                stat_obj = j_str(ps, value);
                if (!stat_obj) status = FAIL;
                raw = stat_obj;
                for (int c = 0; c < 4; c++) kinds[c] = K_RAW;
            } else if (status == OK) {
                status = j_cell(ps, value, &nums[0], &kinds[0], &raw);
                for (int c = 1; c < 4; c++) {
                    nums[c] = nums[0];
                    kinds[c] = kinds[0];
                }
            }
        }
        if (by_text && status == OK) {
            if (!stat_text) {
                status = FAIL;
            } else {
                raw = stat_text;
                for (int c = 0; c < 4; c++) kinds[c] = K_RAW;
            }
        }
    }
    if (status == OK) { /* md5: as given (`md5 or stat` for texts), else the checksum of str(value) */
        int given = j_is(ps, md5_node, J_STR) && (!by_text || ps->v[md5_node].n > 0);
        if (given) {
            md5 = j_str(ps, md5_node);
        } else if (by_text) {
            Py_INCREF(stat_text);
            md5 = stat_text;
        } else {
            const char *t = NULL;
            Py_ssize_t tn = 0;
            if (value < 0 || ps->v[value].kind == J_NULL) {
                t = "";
            } else if (ps->v[value].kind == J_ARR && shape != s_empty_list) { /* torch.Size: str(value) */
                t = PyUnicode_AsUTF8AndSize(shape, &tn);
                if (!t) status = FAIL;
            } else {
                status = j_text(ps, value, &w->text);
                t = w->text.p;
                tn = w->text.len;
            }
            if (status == OK) {
                uint32_t c = crc32_bytes(t, tn);
                static const char digits[] = "0123456789abcdef";
                char hex[8];
                for (int i = 7; i >= 0; i--, c >>= 4) hex[i] = digits[c & 0xF];
                md5 = PyUnicode_FromStringAndSize(hex, 8);
            }
        }
        if (status == OK && !md5) status = FAIL;
    }
    if (status == OK && raw) {
        PyObject *cells[4] = {raw, raw, raw, raw};
        status = queue_raw(w, cells);
    }
    if (status == OK) status = add_row(w, name, state, dtype, shape, nums, kinds, RG_MISSING, md5, data_name);
    Py_XDECREF(dtype);
    Py_XDECREF(shape);
    Py_XDECREF(stat_text);
    Py_XDECREF(stat_obj);
    Py_XDECREF(md5);
    return status;
}

/* The members of a tensor leaf that j_leaf reads, found in one pass over its members (-1 when absent). */
enum { L_CLASS_TYPE, L_DATA_NAME, L_DTYPE, L_MD5, L_SHAPE, L_REQUIRES_GRAD, L_MAX, L_MIN, L_MEAN, L_NORM, L_COUNT };

static void j_leaf_members(const Parser *ps, int32_t leaf, int32_t at[L_COUNT]) {
    for (int i = 0; i < L_COUNT; i++) at[i] = -1;
    for (int32_t o = ps->v[leaf].child; o >= 0; o = ps->v[o].next) {
        const char *k = ps->v[o].key;
        int slot = -1;
        switch (ps->v[o].key_n) {
        case 3:
            slot = memcmp(k, "Max", 3) == 0 ? L_MAX : memcmp(k, "Min", 3) == 0 ? L_MIN : memcmp(k, "md5", 3) == 0 ? L_MD5 : -1;
            break;
        case 4:
            slot = memcmp(k, "Mean", 4) == 0 ? L_MEAN : memcmp(k, "Norm", 4) == 0 ? L_NORM : -1;
            break;
        case 5:
            slot = memcmp(k, "dtype", 5) == 0 ? L_DTYPE : memcmp(k, "shape", 5) == 0 ? L_SHAPE : -1;
            break;
        case 9:
            slot = memcmp(k, "data_name", 9) == 0 ? L_DATA_NAME : -1;
            break;
        case 10:
            slot = memcmp(k, "class_type", 10) == 0 ? L_CLASS_TYPE : -1;
            break;
        case 13:
            slot = memcmp(k, "requires_grad", 13) == 0 ? L_REQUIRES_GRAD : -1;
            break;
        }
        if (slot >= 0 && at[slot] < 0) at[slot] = o; /* names are unique in an object (j_value) */
    }
}

static int j_leaf(Walker *w, const Parser *ps, int32_t leaf, int state) {
    int32_t at[L_COUNT];
    j_leaf_members(ps, leaf, at);
    if (at[L_CLASS_TYPE] >= 0) return FALLBACK;
    int32_t dn = at[L_DATA_NAME];
    PyObject *name, *data_name;
    if (j_is(ps, dn, J_STR) && ps->v[dn].n > 0 && !j_equals(ps, dn, "-1")) {
        const JNode *x = &ps->v[dn];
        Py_ssize_t cut = x->n;
        for (Py_ssize_t i = x->n - 1; i >= 0; i--)
            if (x->s[i] == '.') {
                cut = i;
                break;
            }
        data_name = j_str(ps, dn);
        name = ascii_name(x->s, cut);
    } else {
        Py_INCREF(s_minus1);
        data_name = s_minus1;
        name = ascii_name(w->name.p, w->name.len);
    }
    int status = name && data_name ? OK : FAIL;
    int32_t dtype = at[L_DTYPE], md5 = at[L_MD5];
    if (status != OK) {
    } else if (md5 >= 0 && ps->v[md5].kind != J_NULL && ps->v[md5].kind != J_STR) {
        status = FALLBACK;
    } else if (dtype < 0 || ps->v[dtype].kind == J_NULL) {
        status = j_scalar(w, ps, leaf, name, state, md5, data_name);
    } else if (ps->v[dtype].kind != J_STR) {
        status = FALLBACK;
    } else {
        PyObject *shape = NULL, *dtype_text = NULL, *md5_text = NULL;
        int32_t shape_node = at[L_SHAPE], rg_node = at[L_REQUIRES_GRAD];
        int rg = RG_MISSING;
        if (j_is(ps, rg_node, J_TRUE))
            rg = RG_TRUE;
        else if (j_is(ps, rg_node, J_FALSE))
            rg = RG_FALSE;
        else if (rg_node >= 0 && ps->v[rg_node].kind != J_NULL)
            status = FALLBACK;
        double nums[4];
        int8_t kinds[4];
        PyObject *raw[4];
        int any_raw = 0;
        for (int c = 0; c < 4 && status == OK; c++) {
            status = j_cell(ps, at[L_MAX + c], &nums[c], &kinds[c], &raw[c]);
            any_raw |= raw[c] != NULL;
        }
        if (status == OK) status = j_int_list_text(w, ps, shape_node, &shape);
        if (status == OK) {
            dtype_text = span_text(w, ps->v[dtype].s, ps->v[dtype].n);
            md5_text = j_is(ps, md5, J_STR) ? j_str(ps, md5) : (Py_INCREF(Py_None), Py_None);
            if (!dtype_text || !md5_text) status = FAIL;
        }
        if (status == OK && any_raw) status = queue_raw(w, raw);
        if (status == OK) status = add_row(w, name, state, dtype_text, shape, nums, kinds, rg, md5_text, data_name);
        Py_XDECREF(shape);
        Py_XDECREF(dtype_text);
        Py_XDECREF(md5_text);
    }
    Py_XDECREF(name);
    Py_XDECREF(data_name);
    return status;
}

static int j_is_leaf(const Parser *ps, int32_t k) {
    return j_is(ps, j_get(ps, k, "type"), J_STR) || j_get(ps, k, "class_type") >= 0;
}

static int j_walk(Walker *w, const Parser *ps, int32_t k, int state, int depth, int index_lists) {
    if (depth >= MAX_DEPTH - 1) return FALLBACK;
    uint8_t kind = ps->v[k].kind;
    if (kind == J_NULL) return null_row(w, state);
    Py_ssize_t mark = w->name.len;
    int status = OK;
    if (kind == J_ARR) {
        int64_t i = 0;
        for (int32_t c = ps->v[k].child; c >= 0 && status == OK; c = ps->v[c].next, i++) {
            if (index_lists) {
                char digits[24];
                if (name_push_text(w, digits, format_int(digits, (long long)i)) < 0) return FAIL;
            }
            status = ps->v[c].kind == J_OBJ && j_is_leaf(ps, c) ? j_leaf(w, ps, c, state)
                                                                  : j_walk(w, ps, c, state, depth + 1, 1);
            w->name.len = mark;
        }
        return status;
    }
    if (kind == J_OBJ) {
        if (j_is_leaf(ps, k)) return j_leaf(w, ps, k, state);
        for (int32_t c = ps->v[k].child; c >= 0 && status == OK; c = ps->v[c].next) {
            if (name_push_text(w, ps->v[c].key, ps->v[c].key_n) < 0) return FAIL;
            status = j_walk(w, ps, c, state, depth + 1, 1);
            w->name.len = mark;
        }
        return status;
    }
    return FALLBACK;
}

static int j_has_md5(const Parser *ps, int32_t body) {
    for (int32_t c = ps->v[body].child; c >= 0; c = ps->v[c].next) {
        if (ps->v[c].kind == J_ARR) {
            for (int32_t x = ps->v[c].child; x >= 0; x = ps->v[x].next)
                if (ps->v[x].kind == J_OBJ && j_get(ps, x, "md5") >= 0) return 1;
        } else if (ps->v[c].kind == J_OBJ && j_get(ps, c, "md5") >= 0) {
            return 1;
        }
    }
    return 0;
}

/* The rows of one entry (name span, body node). */
static int j_entry(Walker *w, const Parser *ps, const char *op, Py_ssize_t n, int32_t body) {
    if (ps->v[body].kind != J_OBJ) return FALLBACK;
    const char *last = op;
    for (Py_ssize_t i = n - 1; i >= 0; i--)
        if (op[i] == '.') {
            last = op + i + 1;
            break;
        }
    Py_ssize_t last_n = n - (last - op);
    if (last_n == 5 && memcmp(last, "debug", 5) == 0) return FALLBACK;
    int status = OK;
    if (is_param_grad(op, n)) {
        for (int32_t c = ps->v[body].child; c >= 0 && status == OK; c = ps->v[c].next) {
            if (set_name(w, op, n) < 0 || name_push_text(w, ps->v[c].key, ps->v[c].key_n) < 0) return FAIL;
            status = j_walk(w, ps, c, S_PARAMETERS_GRAD, 1, 0);
        }
        return status;
    }
    for (int f = 0; f < N_FIELDS && status == OK; f++) {
        int32_t c = j_get(ps, body, FIELDS[f].key);
        if (c < 0) continue;
        const char *suffix = FIELDS[f].suffix;
        if (set_name(w, op, n) < 0 || buf_put(&w->name, suffix, (Py_ssize_t)strlen(suffix)) < 0) return FAIL;
        status = j_walk(w, ps, c, FIELDS[f].state, 1, 1);
    }
    return status;
}

/* ---- the members of "data", in any layout ------------------------------------------------------------------
 *
 * Walker.walk(buf, pos, final) reads the members of "data" from buf[pos] on, where pos is at (or before blanks
 * before) the "{" that opens "data", the "," between two members, or the "}" that closes it. Whitespace may be
 * anywhere JSON allows it, so one path serves every layout (compact, any indent, CRLF line ends). Each member is
 * added whole or not at all, and only once the byte after it (a "," or the closing "}") is in the buffer. It
 * returns (names added, pos, status, extent):
 *   WALK_END     "data" closed: pos is just past its "}";
 *   WALK_MORE    the next member does not end inside buf (and buf is not `final`): read more and call again at
 *                pos (the delimiter before that member);
 *   WALK_OBJECT  the member at pos (its name's quote) is one this path leaves to the object path; it spans
 *                buf[pos:extent] and is followed by a "," or "}" (call again at extent once it is handled); an
 *                extent of -1 means it could not be delimited (invalid JSON: the caller's general path words the
 *                error).
 */
enum { WALK_END = 0, WALK_MORE = 1, WALK_OBJECT = 2 };

/* The end of the JSON string whose quote is at p (escapes and any bytes allowed), or NULL if it runs past end. */
static const char *skip_string(const char *p, const char *end) {
    for (p++; p < end; p++) {
        if (*p == '\\') {
            p++;
        } else if (*p == '"') {
            return p + 1;
        }
    }
    return NULL;
}

/* The end of the value at p (after blanks): a container by its brackets (strings skipped whole), a string, or a
 * scalar (a run up to a delimiter). NULL when it runs past end; p itself when there is no value. */
static const char *skip_value(const char *p, const char *end) {
    while (p < end && is_ws[(unsigned char)*p]) p++;
    if (p >= end) return NULL;
    if (*p == '"') return skip_string(p, end);
    if (*p == '{' || *p == '[') {
        Py_ssize_t depth = 0;
        for (; p < end; p++) {
            char c = *p;
            if (c == '"') {
                p = skip_string(p, end);
                if (!p) return NULL;
                p--;
            } else if (c == '{' || c == '[') {
                depth++;
            } else if (c == '}' || c == ']') {
                if (--depth == 0) return p + 1;
            }
        }
        return NULL;
    }
    const char *q = p;
    while (q < end && !is_ws[(unsigned char)*q] && *q != ',' && *q != '}' && *q != ']' && *q != ':') q++;
    return q < end ? q : NULL;
}

/* A member `"name": value` at p and the delimiter after it: WALK_MORE when it runs past end, else WALK_OBJECT
 * with *extent = the end of its value (-1 when it is not a member followed by "," or "}"). */
static int member_extent(const char *p, const char *end, const char *base, Py_ssize_t *extent) {
    *extent = -1;
    if (p >= end) return WALK_MORE;
    if (*p != '"') return WALK_OBJECT;
    const char *q = skip_string(p, end);
    if (!q) return WALK_MORE;
    while (q < end && is_ws[(unsigned char)*q]) q++;
    if (q >= end) return WALK_MORE;
    if (*q != ':') return WALK_OBJECT;
    const char *v = skip_value(q + 1, end);
    if (!v) return WALK_MORE;
    if (v == q + 1) return WALK_OBJECT;
    const char *d = v;
    while (d < end && is_ws[(unsigned char)*d]) d++;
    if (d >= end) return WALK_MORE;
    if (*d == ',' || *d == '}') *extent = v - base;
    return WALK_OBJECT;
}

static PyObject *walk_result(PyObject *names, Py_ssize_t pos, int status, Py_ssize_t extent) {
    return Py_BuildValue("(Nnin)", names, pos, status, extent);
}

static PyObject *Walker_walk(Walker *w, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos;
    int final;
    if (walker_ready(w) < 0 || !PyArg_ParseTuple(args, "y*np", &view, &pos, &final)) return NULL;
    if (pos < 0 || pos > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "walk: position out of range");
        return NULL;
    }
    w->busy = 1;
    const char *base = (const char *)view.buf, *end = base + view.len;
    Parser *ps = &w->parser;
    PyObject *names = PyList_New(0);
    int status = names ? OK : FAIL, result = WALK_MORE;
    Py_ssize_t extent = -1;
    ps->end = end;
    ps->p = base + pos;
    while (status == OK) {
        j_ws(ps);
        const char *delim = ps->p;
        if (delim >= end) { /* nothing after the last member: more text, or (final) not valid JSON */
            result = final ? WALK_OBJECT : WALK_MORE;
            pos = delim - base;
            break;
        }
        if (*delim == '}') {
            result = WALK_END;
            pos = delim + 1 - base;
            break;
        }
        if (*delim != '{' && *delim != ',') { /* not reachable from a checked member: the general path decides */
            result = WALK_OBJECT;
            pos = delim - base;
            break;
        }
        ps->p++;
        j_ws(ps);
        if (*delim == '{' && ps->p < end && *ps->p == '}') {
            result = WALK_END;
            pos = ps->p + 1 - base;
            break;
        }
        const char *at = ps->p;
        Mark m;
        mark_take(w, &m);
        const char *op;
        Py_ssize_t n;
        int32_t body = -1;
        int entry_status = FALLBACK;
        if (at < end && *at == '"' && j_string(ps, &op, &n) == 0) {
            j_ws(ps);
            if (ps->p < end && *ps->p == ':') {
                ps->p++;
                ps->len = 0;
                body = j_value(ps, 1);
                if (body == -2) {
                    PyErr_NoMemory();
                    status = FAIL;
                    break;
                }
                if (body >= 0) {
                    j_ws(ps); /* the member counts only once the delimiter after it is here */
                    if (ps->p < end && (*ps->p == ',' || *ps->p == '}')) entry_status = OK;
                }
            }
        }
        PyObject *name = NULL;
        if (entry_status == OK) {
            name = PyUnicode_FromStringAndSize(op, n);
            if (!name) {
                status = FAIL;
                break;
            }
            w->entry = (int32_t)PyList_GET_SIZE(w->entries);
            entry_status = j_entry(w, ps, op, n, body);
        }
        if (entry_status == OK && PyList_Append(w->entries, name) < 0) entry_status = FAIL;
        if (entry_status == OK && PyList_Append(names, name) < 0) entry_status = FAIL;
        if (entry_status == OK) entry_status = commit_raw(w);
        Py_XDECREF(name);
        if (entry_status != OK) {
            if (rollback(w, &m) < 0 || entry_status == FAIL) {
                status = FAIL;
                break;
            }
            result = member_extent(at, end, base, &extent);
            if (result == WALK_MORE && final) result = WALK_OBJECT; /* cut short: not valid JSON */
            pos = result == WALK_MORE ? delim - base : at - base;
            break;
        }
        if (!w->has_md5 && j_has_md5(ps, body)) w->has_md5 = 1;
    }
    PyBuffer_Release(&view);
    w->busy = 0;
    if (status != OK) {
        Py_XDECREF(names);
        return NULL;
    }
    return walk_result(names, pos, result, extent);
}

/* skip(buf, pos, depth) -> (pos, depth, done): bracket counting over a container that may span several buffers
 * (strings skipped whole). done when the bracket that opened at depth 0 closed; pos is then just past it. Else pos
 * is len(buf), or the quote of a string the buffer cuts (scanned again with the next buffer), as the regex scanner
 * it replaces leaves it. Like that scanner, it does not validate (the parse of what it delimits does). */
static PyObject *rowwalk_skip(PyObject *module, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, depth;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &pos, &depth)) return NULL;
    if (pos < 0 || pos > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "skip: position out of range");
        return NULL;
    }
    const unsigned char *base = (const unsigned char *)view.buf, *p = base + pos, *end = base + view.len;
    int done = 0;
    for (;;) {
        /* a table look-up per byte (SSE2 compares were slower here: the structure is dense) */
        while (p < end && !skip_class[*p]) p++;
        if (p >= end) break;
        uint8_t k = skip_class[*p];
        if (k == SK_QUOTE) {
            const unsigned char *q = p + 1;
            for (;;) {
                while (q < end && !string_class[*q]) q++;
                if (q >= end || *q == '"') break;
                q += 2; /* a backslash and the byte it escapes */
            }
            if (q >= end) break; /* cut by the end of the buffer: pos stays at its quote */
            p = q + 1;
            continue;
        }
        p++;
        if (k == SK_OPEN) {
            depth++;
        } else if (--depth == 0) {
            done = 1;
            break;
        }
    }
    Py_ssize_t at = p - base;
    PyBuffer_Release(&view);
    return Py_BuildValue("(nnO)", at, depth, done ? Py_True : Py_False);
}

static PyObject *Walker_flush(Walker *w, PyObject *unused) {
    if (walker_ready(w) < 0) return NULL;
    w->busy = 1; /* frombytes may be Python code */
    for (int i = 0; i < 5; i++) {
        if (!w->bufs[i].len) continue;
        PyObject *bytes = PyBytes_FromStringAndSize(w->bufs[i].p, w->bufs[i].len);
        PyObject *r = bytes ? PyObject_CallMethodObjArgs(w->arrays[i], s_frombytes, bytes, NULL) : NULL;
        Py_XDECREF(bytes);
        if (!r) {
            w->busy = 0;
            return NULL;
        }
        Py_DECREF(r);
        w->bufs[i].len = 0;
    }
    w->busy = 0;
    Py_RETURN_NONE;
}

static PyObject *Walker_has_md5(Walker *w, void *closure) { return PyBool_FromLong(w->has_md5); }

static PyMethodDef Walker_methods[] = {
    {"entry", (PyCFunction)(void (*)(void))Walker_entry, METH_FASTCALL,
     "entry(op, body) -> bool: add the entry's rows; False (nothing added) when the Python walk must do it"},
    {"walk", (PyCFunction)Walker_walk, METH_VARARGS,
     "walk(buf, pos, final) -> (names of the entries added, pos, status, extent): the members of \"data\" from "
     "the delimiter at pos on (see WALK_END, WALK_MORE, WALK_OBJECT)"},
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
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)Walker_traverse,
    .tp_clear = (inquiry)Walker_clear,
    .tp_free = PyObject_GC_Del,
    .tp_doc = "Walker(names, dtype, shape, md5, data_name, entries, entry_index, state, stats, kinds, rg, raw_rows, "
              "strings, intern_limit)",
    .tp_methods = Walker_methods,
    .tp_getset = Walker_getset,
    .tp_init = (initproc)Walker_init,
    .tp_new = PyType_GenericNew,
};

static PyMethodDef module_methods[] = {
    {"skip", rowwalk_skip, METH_VARARGS,
     "skip(buf, pos, depth) -> (pos, depth, done): bracket counting over a container, resumable"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_rowwalk", "Native walk of dump.json entries.", -1,
                                    module_methods};

#define INTERN(var, text)                                                                                          \
    if (!((var) = PyUnicode_InternFromString(text))) return NULL;

PyMODINIT_FUNC PyInit__rowwalk(void) {
    seeded_hash = PyHash_GetFuncDef()->hash;
    crc_init();
    j_tables();
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
    /* the codes the walker writes into the row table: load/rows.py checks them against StatKind, State and its
     * RG_* values when it makes a walker */
    if (PyModule_AddIntConstant(m, "WALK_END", WALK_END) < 0 ||
        PyModule_AddIntConstant(m, "WALK_MORE", WALK_MORE) < 0 ||
        PyModule_AddIntConstant(m, "WALK_OBJECT", WALK_OBJECT) < 0 ||
        PyModule_AddIntConstant(m, "K_NUMBER", K_NUMBER) < 0 || PyModule_AddIntConstant(m, "K_INT", K_INT) < 0 ||
        PyModule_AddIntConstant(m, "K_NAN", K_NAN) < 0 || PyModule_AddIntConstant(m, "K_NONE", K_NONE) < 0 ||
        PyModule_AddIntConstant(m, "K_RAW", K_RAW) < 0 ||
        PyModule_AddIntConstant(m, "S_INPUT", S_INPUT) < 0 ||
        PyModule_AddIntConstant(m, "S_PARAMETERS", S_PARAMETERS) < 0 ||
        PyModule_AddIntConstant(m, "S_OUTPUT", S_OUTPUT) < 0 ||
        PyModule_AddIntConstant(m, "S_PARAMETERS_GRAD", S_PARAMETERS_GRAD) < 0 ||
        PyModule_AddIntConstant(m, "RG_MISSING", RG_MISSING) < 0 ||
        PyModule_AddIntConstant(m, "RG_FALSE", RG_FALSE) < 0 || PyModule_AddIntConstant(m, "RG_TRUE", RG_TRUE) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
