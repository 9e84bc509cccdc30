/* Native assembly of CSV rows (render/flat.py) and xlsx sheet rows (render/xlsx.py): a block of rows from
 * per-column specs, as bytes.
 *
 * A column is one of:
 *   [str, ...]                      the cells' CSV fields, ready;
 *   (codes int32[n], [str, ...])    cell i is texts[codes[i]];
 *   (list, start, None)             CSV only: cell i is the text list[start + i], made a field here (flat.neutralise,
 *                                   quoted as csv.writer); (list, rows int64[n], None, missing): list[rows[i]],
 *                                   `missing` where rows[i] is -1;
 *   (values float64[n], kinds int8[n], codes int32[n], [str, ...], bytes or None)
 *     (+ orjson's text of the values, "[a,b,...]", or None)
 *                                   KIND_FLOAT 0: repr(value); KIND_INT 1: str(int(value)); KIND_PERCENT 2:
 *                                   repr(value) + "%", neutralised with a leading apostrophe when it starts with
 *                                   "-"; KIND_OTHER 3: texts[codes[i]]. The digits of finite floats come from
 *                                   orjson's text (shortest round trip, as repr), re-laid out as repr writes
 *                                   them (either exponent spelling: 1e16 or 1e+16); without that text, and for
 *                                   anything else, from Python's own repr/str.
 * JSON lines (json=True): a numeric column has two more items, the text before and after each number (the
 * member's key and the row's braces); floats are repr's text, percents and non-finite floats quoted texts, and
 * nothing is put between cells or after rows (the texts carry it).
 * Fields are joined with "," and rows end with "\r\n", as csv.writer (excel dialect) writes them. The texts are
 * Python's own (repr via PyOS_double_to_string, str of ints), so the bytes equal the Python path's.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* The cell kinds of a numeric column (render/cellkind.py checks them against CellKind at import). */
enum { KIND_FLOAT = 0, KIND_INT = 1, KIND_PERCENT = 2, KIND_OTHER = 3 };

/* The output: built straight into a bytes object (no copy at the end), sized from the previous block's bytes per
 * row so that a block rarely grows it (the rows' fields are read from shared objects, never copied first). */
typedef struct {
    PyObject *bytes;
    char *p;
    Py_ssize_t len, cap;
} Out;

static double bytes_per_row = 64.0; /* of the last block assembled (per process: a forked writer learns its own) */

static int out_init(Out *o, Py_ssize_t rows) {
    double guess = bytes_per_row * (double)rows * 1.0625 + 4096.0;
    o->cap = guess < (double)(1 << 25) ? (Py_ssize_t)guess : 1 << 25; /* beyond 32 MB it grows as it goes */
    o->len = 0;
    o->bytes = PyBytes_FromStringAndSize(NULL, o->cap);
    o->p = o->bytes ? PyBytes_AS_STRING(o->bytes) : NULL;
    return o->bytes ? 0 : -1;
}

static int out_grow(Out *o, Py_ssize_t n) {
    Py_ssize_t cap = o->cap ? o->cap : 1 << 16;
    while (cap < o->len + n) cap *= 2;
    if (_PyBytes_Resize(&o->bytes, cap) < 0) { /* frees the object on failure */
        o->p = NULL;
        return -1;
    }
    o->p = PyBytes_AS_STRING(o->bytes);
    o->cap = cap;
    return 0;
}

static inline int out_put(Out *o, const char *s, Py_ssize_t n) {
    if (o->len + n > o->cap && out_grow(o, n) < 0) return -1;
    char *d = o->p + o->len;
    if (n <= 16) {
        for (Py_ssize_t i = 0; i < n; i++) d[i] = s[i];
    } else {
        memcpy(d, s, (size_t)n);
    }
    o->len += n;
    return 0;
}

/* The bytes assembled (a new reference; the Out is spent), or NULL. */
static PyObject *out_result(Out *o, Py_ssize_t rows) {
    PyObject *b = o->bytes;
    o->bytes = NULL;
    if (b == NULL || _PyBytes_Resize(&b, o->len) < 0) return NULL;
    if (rows > 0) bytes_per_row = (double)o->len / (double)rows;
    return b;
}

static void out_free(Out *o) {
    Py_CLEAR(o->bytes);
}

static int put_text(Out *o, PyObject *text) {
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "csv_block: cell texts must be str");
        return -1;
    }
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(text, &n);
    return s ? out_put(o, s, n) : -1;
}

static int put_repr(Out *o, double v, int percent) {
    char *r = PyOS_double_to_string(v, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (!r) return -1;
    int bad = (percent && r[0] == '-' && out_put(o, "'", 1) < 0) || out_put(o, r, (Py_ssize_t)strlen(r)) < 0 ||
              (percent && out_put(o, "%", 1) < 0);
    PyMem_Free(r);
    return bad ? -1 : 0;
}

static int put_int(Out *o, double v) {
    if (v > -9.2e18 && v < 9.2e18) {
        long long x = (long long)v;
        char tmp[24], rev[24];
        int n = 0, k = 0;
        unsigned long long u = x < 0 ? 0ull - (unsigned long long)x : (unsigned long long)x;
        do {
            rev[n++] = (char)('0' + u % 10);
            u /= 10;
        } while (u);
        if (x < 0) tmp[k++] = '-';
        while (n) tmp[k++] = rev[--n];
        return out_put(o, tmp, k);
    }
    PyObject *big = PyLong_FromDouble(v); /* exact; an error for non-finite values */
    if (!big) return -1;
    PyObject *text = PyObject_Str(big);
    Py_DECREF(big);
    if (!text) return -1;
    int bad = put_text(o, text);
    Py_DECREF(text);
    return bad;
}

/* Python's repr of a finite float from orjson's text of it: the same shortest digits, in another layout where
 * exponents are involved (orjson 1.5e16 up to 3.10, 1.5e+16 from 3.11, 2e-7 in all; repr 1.5e+16 / 2e-07) and
 * for 1e-5 <= |x| < 1e-4 (orjson 0.0000123, repr 1.23e-05). */
static int put_orjson_as_repr(Out *o, const char *t, Py_ssize_t n) {
    const char *e = memchr(t, 'e', (size_t)n);
    if (e) {
        const char *x = e + 1;
        Py_ssize_t xn = n - (x - t);
        int neg = xn > 0 && *x == '-';
        if (neg || (xn > 0 && *x == '+')) {
            x++;
            xn--;
        }
        if (out_put(o, t, e - t + 1) < 0 || out_put(o, neg ? "-" : "+", 1) < 0) return -1;
        if (xn < 2 && out_put(o, "0", 1) < 0) return -1;
        return out_put(o, x, xn);
    }
    int neg = n > 0 && *t == '-';
    const char *u = t + neg;
    Py_ssize_t un = n - neg;
    if (un > 6 && memcmp(u, "0.0000", 6) == 0 && u[6] >= '1' && u[6] <= '9') {
        if (neg && out_put(o, "-", 1) < 0) return -1;
        if (out_put(o, u + 6, 1) < 0) return -1;
        if (un > 7 && (out_put(o, ".", 1) < 0 || out_put(o, u + 7, un - 7) < 0)) return -1;
        return out_put(o, "e-05", 4);
    }
    return out_put(o, t, n);
}

/* repr of a finite float: from orjson's token when there is one, else Python's own. */
static int put_float(Out *o, double v, const char *tok, Py_ssize_t tok_n) {
    if (!tok) return put_repr(o, v, 0);
    double a = fabs(v);
    if (a >= 1e-4 && a < 1e16) return out_put(o, tok, tok_n); /* no exponent either way: orjson's text is repr's */
    return put_orjson_as_repr(o, tok, tok_n);
}

/* str(int(v)) of an integral float: orjson's "D.0" below 1e16 without ".0" when there is a token. */
static int put_integral(Out *o, double v, const char *tok, Py_ssize_t tok_n) {
    if (v == 0.0) return out_put(o, "0", 1);
    if (tok && fabs(v) < 1e16 && tok_n > 2 && memcmp(tok + tok_n - 2, ".0", 2) == 0) return out_put(o, tok, tok_n - 2);
    return put_int(o, v);
}

enum { C_TEXTS, C_CODED, C_NUMERIC, C_FIELDS };

typedef struct {
    int type;
    PyObject *texts; /* list */
    Py_buffer values, kinds, codes;
    int has_values, has_kinds, has_codes;
    const char *num; /* orjson's text of the values: "[a,b,...]"; the cursor moves along (NULL: none) */
    const char *num_end;
    const char *pre, *suf; /* JSON lines: the text before and after a number ("key": and separators) */
    Py_ssize_t pre_n, suf_n;
    Py_ssize_t start; /* C_FIELDS: the block's first row in the list */
    Py_buffer rows;   /* C_FIELDS with rows: the row of the list for each cell (int64; -1: `missing`) */
    int has_rows;
    PyObject *missing;
} Spec;

/* The next row's token of orjson's text of a numeric column (the cursor moves past it); -1 with a ValueError
   naming `what` when the text is shorter than the column. */
static int next_number(Spec *s, const char **tok, Py_ssize_t *tok_n, const char *what) {
    const char *q = memchr(s->num, ',', (size_t)(s->num_end - s->num));
    if (!q) q = s->num_end;
    if (q == s->num) {
        PyErr_Format(PyExc_ValueError, "%s: the number text is shorter than the column", what);
        return -1;
    }
    *tok = s->num;
    *tok_n = q - s->num;
    s->num = q < s->num_end ? q + 1 : q;
    return 0;
}

/* The text of row i of a coded column (its code into the texts); NULL with an IndexError naming `what`. */
static PyObject *coded_text(const Spec *s, Py_ssize_t i, const char *what) {
    int32_t code = ((const int32_t *)s->codes.buf)[i];
    if (code < 0 || code >= PyList_GET_SIZE(s->texts)) {
        PyErr_Format(PyExc_IndexError, "%s: a code out of its texts", what);
        return NULL;
    }
    return PyList_GET_ITEM(s->texts, code);
}

/* Item i of a list, checked against its length now: a callback into Python may have shrunk it since the call began. */
static PyObject *list_item(PyObject *list, Py_ssize_t i) {
    if (i >= PyList_GET_SIZE(list)) {
        PyErr_SetString(PyExc_RuntimeError, "a column's list changed during the call");
        return NULL;
    }
    return PyList_GET_ITEM(list, i);
}

/* The cell of row i of a field/value column: list[start + i], or list[rows[i]] (`missing` where -1). */
static PyObject *list_cell(const Spec *s, Py_ssize_t i) {
    if (!s->has_rows) return list_item(s->texts, s->start + i);
    int64_t r = ((const int64_t *)s->rows.buf)[i];
    if (r < 0) return s->missing;
    if (r >= PyList_GET_SIZE(s->texts)) {
        PyErr_SetString(PyExc_IndexError, "a row out of its list");
        return NULL;
    }
    return PyList_GET_ITEM(s->texts, r);
}

/* (list, start, x) or (list, rows int64[n], x, missing): a column read in place from a whole list. */
static int list_spec(Spec *s, PyObject *c, Py_ssize_t n, const char *what) {
    s->texts = PyTuple_GET_ITEM(c, 0);
    PyObject *at = PyTuple_GET_ITEM(c, 1);
    if (!PyList_Check(s->texts)) {
        PyErr_Format(PyExc_TypeError, "%s column needs a list", what);
        return -1;
    }
    if (PyTuple_GET_SIZE(c) == 4) {
        s->missing = PyTuple_GET_ITEM(c, 3);
        if (PyObject_GetBuffer(at, &s->rows, PyBUF_C_CONTIGUOUS) < 0) return -1;
        s->has_rows = 1;
        if (s->rows.len != 8 * n) {
            PyErr_Format(PyExc_ValueError, "%s column's rows must hold %zd int64 items", what, n);
            return -1;
        }
        return 0;
    }
    s->start = PyLong_AsSsize_t(at);
    if (s->start == -1 && PyErr_Occurred()) return -1;
    if (s->start < 0 || s->start > PyList_GET_SIZE(s->texts) - n) {
        PyErr_Format(PyExc_ValueError, "%s column is (list, start, ...) with n rows from start", what);
        return -1;
    }
    return 0;
}

/* A text as csv.writer (excel dialect, QUOTE_MINIMAL) writes flat.neutralise(text): a leading apostrophe where a
   spreadsheet would run a formula (= + - @ tab CR and their fullwidth forms; not "-inf" or "-"), quoted where it
   holds a comma, a quote or a line end. The list's items are read without a new reference (a forked writer
   touches no object it shares with its parent). */
static int put_field(Out *o, PyObject *text) {
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "csv_block: field texts must be str");
        return -1;
    }
    Py_ssize_t n;
    const unsigned char *u = (const unsigned char *)PyUnicode_AsUTF8AndSize(text, &n);
    if (!u) return -1;
    const char *s = (const char *)u;
    int formula = n > 0 && ((s[0] && strchr("=+-@\t\r", s[0]) != NULL) ||
                            (n >= 3 && u[0] == 0xEF && u[1] == 0xBC &&
                             (u[2] == 0x9D || u[2] == 0x8B || u[2] == 0x8D || u[2] == 0xA0)));
    if (formula && ((n == 4 && memcmp(s, "-inf", 4) == 0) || (n == 1 && s[0] == '-'))) formula = 0;
    /* the text is NUL-terminated: strcspn finds the first special character fast; one past a NUL inside the text
       is looked for byte by byte */
    Py_ssize_t at = (Py_ssize_t)strcspn(s, ",\"\r\n");
    int quote = at < n && s[at] != '\0';
    for (Py_ssize_t i = at; i < n && !quote; i++) quote = s[i] == ',' || s[i] == '"' || s[i] == '\r' || s[i] == '\n';
    if ((quote && out_put(o, "\"", 1) < 0) || (formula && out_put(o, "'", 1) < 0)) return -1;
    if (!quote) return out_put(o, s, n);
    Py_ssize_t from = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] == '"') {
            if (out_put(o, s + from, i + 1 - from) < 0) return -1; /* the quote, then its double */
            from = i;
        }
    }
    return out_put(o, s + from, n - from) < 0 || out_put(o, "\"", 1) < 0 ? -1 : 0;
}

static void release(Spec *specs, Py_ssize_t m) {
    for (Py_ssize_t k = 0; k < m; k++) {
        if (specs[k].has_values) PyBuffer_Release(&specs[k].values);
        if (specs[k].has_kinds) PyBuffer_Release(&specs[k].kinds);
        if (specs[k].has_codes) PyBuffer_Release(&specs[k].codes);
        if (specs[k].has_rows) PyBuffer_Release(&specs[k].rows);
    }
    PyMem_Free(specs);
}

static int get_buffer(PyObject *obj, Py_buffer *view, int *flag, Py_ssize_t itemsize, Py_ssize_t n, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0) return -1;
    *flag = 1;
    if (view->len != itemsize * n) {
        PyErr_Format(PyExc_ValueError, "csv_block: %s must hold %zd items of %zd bytes", what, n, itemsize);
        return -1;
    }
    return 0;
}

/* (values f64[n], kinds i8[n], codes i32[n], texts, orjson's text of the values or None, ...): a numeric column. */
static int numeric_spec(Spec *s, PyObject *c, Py_ssize_t n, const char *what) {
    s->texts = PyTuple_GET_ITEM(c, 3);
    PyObject *num = PyTuple_GET_ITEM(c, 4);
    if (get_buffer(PyTuple_GET_ITEM(c, 0), &s->values, &s->has_values, 8, n, "values") < 0 ||
        get_buffer(PyTuple_GET_ITEM(c, 1), &s->kinds, &s->has_kinds, 1, n, "kinds") < 0 ||
        get_buffer(PyTuple_GET_ITEM(c, 2), &s->codes, &s->has_codes, 4, n, "codes") < 0)
        return -1;
    if (num != Py_None) {
        if (!PyBytes_Check(num) || PyBytes_GET_SIZE(num) < 2 || PyBytes_AS_STRING(num)[0] != '[') {
            PyErr_Format(PyExc_ValueError, "%s: the number text must be orjson's array text or None", what);
            return -1;
        }
        s->num = PyBytes_AS_STRING(num) + 1;
        s->num_end = PyBytes_AS_STRING(num) + PyBytes_GET_SIZE(num) - 1;
    }
    return 0;
}

static PyObject *csv_block(PyObject *self, PyObject *args) {
    PyObject *columns;
    Py_ssize_t n;
    int json = 0;
    if (!PyArg_ParseTuple(args, "O!n|p", &PyList_Type, &columns, &n, &json)) return NULL;
    /* the columns held for the call (reading a buffer or an index may run Python code that changes the list) */
    PyObject *held = PyList_AsTuple(columns);
    if (!held) return NULL;
    Py_ssize_t m = PyTuple_GET_SIZE(held);
    Spec *specs = PyMem_Calloc((size_t)(m ? m : 1), sizeof(Spec));
    if (!specs) {
        Py_DECREF(held);
        return PyErr_NoMemory();
    }
    Out o = {NULL, NULL, 0, 0};
    PyObject *result = NULL;
    if (out_init(&o, n) < 0) goto done;
    for (Py_ssize_t k = 0; k < m; k++) {
        PyObject *c = PyTuple_GET_ITEM(held, k);
        Spec *s = &specs[k];
        if (PyList_Check(c)) {
            s->type = C_TEXTS;
            s->texts = c;
            if (PyList_GET_SIZE(c) != n) {
                PyErr_SetString(PyExc_ValueError, "csv_block: a text column of the wrong length");
                goto done;
            }
        } else if (PyTuple_Check(c) && (PyTuple_GET_SIZE(c) == 3 || PyTuple_GET_SIZE(c) == 4) && !json) {
            s->type = C_FIELDS;
            if (list_spec(s, c, n, "csv_block: a field") < 0) goto done;
        } else if (PyTuple_Check(c) && PyTuple_GET_SIZE(c) == 2) {
            s->type = C_CODED;
            s->texts = PyTuple_GET_ITEM(c, 1);
            if (get_buffer(PyTuple_GET_ITEM(c, 0), &s->codes, &s->has_codes, 4, n, "codes") < 0) goto done;
        } else if (PyTuple_Check(c) && PyTuple_GET_SIZE(c) == (json ? 7 : 5)) {
            s->type = C_NUMERIC;
            if (numeric_spec(s, c, n, "csv_block") < 0) goto done;
            if (json) {
                PyObject *pre = PyTuple_GET_ITEM(c, 5), *suf = PyTuple_GET_ITEM(c, 6);
                if (!PyUnicode_Check(pre) || !PyUnicode_Check(suf)) {
                    PyErr_SetString(PyExc_TypeError, "csv_block: the JSON prefix and suffix must be str");
                    goto done;
                }
                s->pre = PyUnicode_AsUTF8AndSize(pre, &s->pre_n);
                s->suf = PyUnicode_AsUTF8AndSize(suf, &s->suf_n);
                if (!s->pre || !s->suf) goto done;
            }
        } else {
            PyErr_SetString(PyExc_TypeError, "csv_block: a column is a list or a tuple of 2, 3 or 4 (not JSON) or 5 (JSON: 7) items");
            goto done;
        }
        if (!PyList_Check(s->texts)) {
            PyErr_SetString(PyExc_TypeError, "csv_block: texts must be a list");
            goto done;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        for (Py_ssize_t k = 0; k < m; k++) {
            Spec *s = &specs[k];
            if (k && !json && out_put(&o, ",", 1) < 0) goto done;
            PyObject *text = NULL;
            if (s->type == C_FIELDS) {
                PyObject *field = list_cell(s, i);
                if (!field || put_field(&o, field) < 0) goto done;
                continue;
            }
            if (s->type == C_TEXTS) {
                text = list_item(s->texts, i);
                if (!text) goto done;
            } else {
                int kind = s->type == C_CODED ? 3 : ((const int8_t *)s->kinds.buf)[i];
                const char *tok = NULL;
                Py_ssize_t tok_n = 0;
                if (s->type == C_NUMERIC && s->num && next_number(s, &tok, &tok_n, "csv_block") < 0) goto done;
                if (kind == KIND_OTHER) {
                    text = coded_text(s, i, "csv_block");
                    if (!text) goto done;
                } else {
                    double v = ((const double *)s->values.buf)[i];
                    int bad;
                    if (json) { /* as orjson writes the value: floats in its own layout, texts quoted */
                        int finite = Py_IS_FINITE(v) && !(tok_n == 4 && memcmp(tok, "null", 4) == 0);
                        bad = out_put(&o, s->pre, s->pre_n) < 0;
                        if (kind == KIND_PERCENT || !finite) {
                            bad = bad || out_put(&o, "\"", 1) < 0 ||
                                  (finite ? put_float(&o, v, tok, tok_n) : put_repr(&o, v, 0)) < 0 ||
                                  (kind == KIND_PERCENT && out_put(&o, "%", 1) < 0) || out_put(&o, "\"", 1) < 0;
                        } else if (kind == KIND_INT) {
                            bad = bad || put_integral(&o, v, tok, tok_n) < 0;
                        } else {
                            bad = bad || put_float(&o, v, tok, tok_n) < 0;
                        }
                        if (bad || out_put(&o, s->suf, s->suf_n) < 0) goto done;
                        continue;
                    }
                    if (!Py_IS_FINITE(v) || (tok_n == 4 && memcmp(tok, "null", 4) == 0)) {
                        bad = kind == KIND_INT ? put_int(&o, v) : put_repr(&o, v, kind == KIND_PERCENT);
                    } else if (kind == KIND_INT) {
                        bad = put_integral(&o, v, tok, tok_n);
                    } else {
                        bad = kind == KIND_PERCENT && signbit(v) && out_put(&o, "'", 1) < 0; /* "-x%" is text: neutralised */
                        bad = bad || put_float(&o, v, tok, tok_n) < 0 || (kind == KIND_PERCENT && out_put(&o, "%", 1) < 0);
                    }
                    if (bad) goto done;
                    continue;
                }
            }
            if (put_text(&o, text) < 0) goto done;
        }
        if (m && !json && out_put(&o, "\r\n", 2) < 0) goto done; /* JSON lines: the last suffix ends the line */
    }
    result = out_result(&o, n);
done:
    out_free(&o);
    release(specs, m);
    Py_DECREF(held);
    return result;
}

/* ---- xlsx sheet rows ------------------------------------------------------------------------------------
 * xml_block(columns, n, first_row, colours, styles) -> bytes of n <row> elements of a sheet (render/xlsx.py).
 * A column is one of:
 *   [str, ...]                      the cells' XML, ready (n items);
 *   (codes int32[n], [str, ...])    cell i is the XML texts[codes[i]];
 *   (values, kinds, codes, [str, ...], bytes or None)  as csv_block's numeric column, texts the XML of the other
 *                                   cells: KIND_FLOAT/KIND_INT <c><v>number</v></c> (a non-finite float a text
 *                                   cell of its repr), KIND_PERCENT a text cell of repr + "%";
 *   (list, start, one)              cell i is list[start + i] (or, given (list, rows int64[n], one, missing),
 *                                   list[rows[i]], `missing` where rows[i] is -1): a str made into its text cell here (escaped as
 *                                   celltext.xml_escape: & < > as entities, characters XML forbids as U+FFFD),
 *                                   anything else (and a text too long for a cell) the XML one(value) returns.
 * Row i is <row r="first_row + i"> and its cells; where styles[colours[i]] is not empty, it follows each "<c" of
 * the row's cells (a whole row filled), as xlsx.py's Python path writes them. The list items are read without a
 * new reference. */

static const char XML_TEXT_END[] = "</t></is></c>";

static int put_styled(Out *o, const char *s, Py_ssize_t n, const char *style, Py_ssize_t style_n) {
    if (!style_n) return out_put(o, s, n);
    Py_ssize_t from = 0;
    for (Py_ssize_t i = 0; i + 1 < n; i++) {
        if (s[i] == '<' && s[i + 1] == 'c') {
            if (out_put(o, s + from, i + 2 - from) < 0 || out_put(o, style, style_n) < 0) return -1;
            from = i + 2;
            i++;
        }
    }
    return out_put(o, s + from, n - from);
}

static int put_piece(Out *o, PyObject *text, const char *style, Py_ssize_t style_n) {
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "xml_block: cell XML must be str");
        return -1;
    }
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(text, &n);
    return s ? put_styled(o, s, n, style, style_n) : -1;
}

static int put_open(Out *o, const char *tag, const char *style, Py_ssize_t style_n) {
    /* "<c" style rest-of-tag */
    return out_put(o, "<c", 2) < 0 || out_put(o, style, style_n) < 0 || out_put(o, tag, (Py_ssize_t)strlen(tag)) < 0 ? -1 : 0;
}

static const char TEXT_TAG[] = " t=\"inlineStr\"><is><t xml:space=\"preserve\">";

static int put_xml_text(Out *o, const unsigned char *u, Py_ssize_t n, const char *style, Py_ssize_t style_n) {
    if (n == 0) return out_put(o, "<c", 2) < 0 || out_put(o, style, style_n) < 0 || out_put(o, "/>", 2) < 0 ? -1 : 0;
    if (put_open(o, TEXT_TAG, style, style_n) < 0) return -1;
    Py_ssize_t from = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = u[i];
        const char *rep = NULL;
        Py_ssize_t skip = 1;
        if (c == '&') rep = "&amp;";
        else if (c == '<') rep = "&lt;";
        else if (c == '>') rep = "&gt;";
        else if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') rep = "\xEF\xBF\xBD";
        else if (c == 0xEF && i + 2 < n && u[i + 1] == 0xBF && (u[i + 2] == 0xBE || u[i + 2] == 0xBF)) {
            rep = "\xEF\xBF\xBD"; /* U+FFFE, U+FFFF */
            skip = 3;
        }
        if (rep) {
            if (out_put(o, (const char *)u + from, i - from) < 0 || out_put(o, rep, (Py_ssize_t)strlen(rep)) < 0) return -1;
            from = i + skip;
            i += skip - 1;
        }
    }
    return out_put(o, (const char *)u + from, n - from) < 0 || out_put(o, XML_TEXT_END, sizeof XML_TEXT_END - 1) < 0 ? -1 : 0;
}

enum { X_PIECES, X_CODED, X_NUMERIC, X_RAW };

static PyObject *xml_block(PyObject *self, PyObject *args) {
    PyObject *columns, *colours_obj, *styles;
    Py_ssize_t n, first_row;
    if (!PyArg_ParseTuple(args, "O!nnOO!", &PyList_Type, &columns, &n, &first_row, &colours_obj, &PyList_Type, &styles))
        return NULL;
    /* the columns and styles held for the call: a value column's callable (or a buffer or an index read) may run
     * Python code that changes the lists; their items are then checked against their lengths where read */
    PyObject *held = PyList_AsTuple(columns), *held_styles = PyList_AsTuple(styles);
    if (!held || !held_styles) {
        Py_XDECREF(held);
        Py_XDECREF(held_styles);
        return NULL;
    }
    Py_ssize_t m = PyTuple_GET_SIZE(held), n_styles = PyTuple_GET_SIZE(held_styles);
    const char *style_s[8];
    Py_ssize_t style_n[8];
    Py_buffer colours = {0};
    int has_colours = 0;
    Spec *specs = NULL;
    PyObject **ones = NULL;
    Out o = {NULL, NULL, 0, 0};
    PyObject *result = NULL;
    if (n_styles < 1 || n_styles > 8) {
        PyErr_SetString(PyExc_ValueError, "xml_block: 1 to 8 styles");
        goto done;
    }
    for (Py_ssize_t k = 0; k < n_styles; k++) {
        PyObject *st = PyTuple_GET_ITEM(held_styles, k);
        if (!PyUnicode_Check(st)) {
            PyErr_SetString(PyExc_TypeError, "xml_block: styles must be str");
            goto done;
        }
        style_s[k] = PyUnicode_AsUTF8AndSize(st, &style_n[k]);
        if (!style_s[k]) goto done;
    }
    if (PyObject_GetBuffer(colours_obj, &colours, PyBUF_C_CONTIGUOUS) < 0) goto done;
    has_colours = 1;
    if (colours.len != n) {
        PyErr_SetString(PyExc_ValueError, "xml_block: one colour (int8) per row");
        goto done;
    }
    specs = PyMem_Calloc((size_t)(m ? m : 1), sizeof(Spec));
    ones = PyMem_Calloc((size_t)(m ? m : 1), sizeof(PyObject *));
    if (!specs || !ones) {
        PyErr_NoMemory();
        goto done;
    }
    if (out_init(&o, n) < 0) goto done;
    for (Py_ssize_t k = 0; k < m; k++) {
        PyObject *c = PyTuple_GET_ITEM(held, k);
        Spec *s = &specs[k];
        if (PyList_Check(c)) {
            s->type = X_PIECES;
            s->texts = c;
            if (PyList_GET_SIZE(c) != n) {
                PyErr_SetString(PyExc_ValueError, "xml_block: a column of cell XML of the wrong length");
                goto done;
            }
        } else if (PyTuple_Check(c) && (PyTuple_GET_SIZE(c) == 3 || PyTuple_GET_SIZE(c) == 4)) {
            s->type = X_RAW;
            ones[k] = PyTuple_GET_ITEM(c, 2);
            if (list_spec(s, c, n, "xml_block: a value") < 0) goto done;
            if (!PyCallable_Check(ones[k])) {
                PyErr_SetString(PyExc_TypeError, "xml_block: a value column's third item is a callable");
                goto done;
            }
        } else if (PyTuple_Check(c) && PyTuple_GET_SIZE(c) == 2) {
            s->type = X_CODED;
            s->texts = PyTuple_GET_ITEM(c, 1);
            if (get_buffer(PyTuple_GET_ITEM(c, 0), &s->codes, &s->has_codes, 4, n, "codes") < 0) goto done;
        } else if (PyTuple_Check(c) && PyTuple_GET_SIZE(c) == 5) {
            s->type = X_NUMERIC;
            if (numeric_spec(s, c, n, "xml_block") < 0) goto done;
        } else {
            PyErr_SetString(PyExc_TypeError, "xml_block: a column is a list or a tuple of 2, 3, 4 or 5 items");
            goto done;
        }
        if (!PyList_Check(s->texts)) {
            PyErr_SetString(PyExc_TypeError, "xml_block: texts must be a list");
            goto done;
        }
    }
    const uint8_t *col_codes = (const uint8_t *)colours.buf;
    char rowhead[48];
    for (Py_ssize_t i = 0; i < n; i++) {
        if (col_codes[i] >= n_styles) {
            PyErr_SetString(PyExc_ValueError, "xml_block: a colour without a style");
            goto done;
        }
        const char *st = style_s[col_codes[i]];
        Py_ssize_t st_n = style_n[col_codes[i]];
        int hn = snprintf(rowhead, sizeof rowhead, "<row r=\"%zd\">", first_row + i);
        if (out_put(&o, rowhead, hn) < 0) goto done;
        for (Py_ssize_t k = 0; k < m; k++) {
            Spec *s = &specs[k];
            if (s->type == X_RAW) {
                PyObject *v = list_cell(s, i);
                if (!v) goto done;
                if (PyUnicode_CheckExact(v) && PyUnicode_GET_LENGTH(v) * 2 <= 32767) {
                    Py_ssize_t tn;
                    const char *t = PyUnicode_AsUTF8AndSize(v, &tn);
                    if (!t || put_xml_text(&o, (const unsigned char *)t, tn, st, st_n) < 0) goto done;
                } else {
                    Py_INCREF(v); /* the callable may drop the list's reference */
                    PyObject *piece = PyObject_CallOneArg(ones[k], v);
                    Py_DECREF(v);
                    if (!piece) goto done;
                    int bad = put_piece(&o, piece, st, st_n);
                    Py_DECREF(piece);
                    if (bad < 0) goto done;
                }
                continue;
            }
            if (s->type == X_PIECES) {
                PyObject *piece = list_item(s->texts, i);
                if (!piece || put_piece(&o, piece, st, st_n) < 0) goto done;
                continue;
            }
            int kind = s->type == X_CODED ? KIND_OTHER : ((const int8_t *)s->kinds.buf)[i];
            const char *tok = NULL;
            Py_ssize_t tok_n = 0;
            if (s->type == X_NUMERIC && s->num && next_number(s, &tok, &tok_n, "xml_block") < 0) goto done;
            if (kind == KIND_OTHER) {
                PyObject *text = coded_text(s, i, "xml_block");
                if (!text || put_piece(&o, text, st, st_n) < 0) goto done;
                continue;
            }
            double v = ((const double *)s->values.buf)[i];
            int finite = Py_IS_FINITE(v) && !(tok_n == 4 && memcmp(tok, "null", 4) == 0);
            int bad;
            if (kind == KIND_PERCENT || !finite) { /* a text cell: repr, and "%" for a percent */
                bad = put_open(&o, TEXT_TAG, st, st_n) < 0 ||
                      (finite ? put_float(&o, v, tok, tok_n) : put_repr(&o, v, 0)) < 0 ||
                      (kind == KIND_PERCENT && out_put(&o, "%", 1) < 0) ||
                      out_put(&o, XML_TEXT_END, sizeof XML_TEXT_END - 1) < 0;
            } else {
                bad = put_open(&o, "><v>", st, st_n) < 0 ||
                      (kind == KIND_INT ? put_integral(&o, v, tok, tok_n) : put_float(&o, v, tok, tok_n)) < 0 ||
                      out_put(&o, "</v></c>", 8) < 0;
            }
            if (bad) goto done;
        }
        if (out_put(&o, "</row>", 6) < 0) goto done;
    }
    result = out_result(&o, n);
done:
    out_free(&o);
    PyMem_Free(ones);
    if (specs) release(specs, m);
    if (has_colours) PyBuffer_Release(&colours);
    Py_DECREF(held);
    Py_DECREF(held_styles);
    return result;
}

static PyMethodDef methods[] = {
    {"csv_block", csv_block, METH_VARARGS,
     "csv_block(columns, n, json=False) -> bytes of n CSV rows, or JSON lines (see the module source)"},
    {"xml_block", xml_block, METH_VARARGS,
     "xml_block(columns, n, first_row, colours, styles) -> bytes of n xlsx sheet rows (see the module source)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_csvrows", "Native CSV and xlsx row assembly.", -1, methods};

PyMODINIT_FUNC PyInit__csvrows(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "KIND_FLOAT", KIND_FLOAT) < 0 ||
        PyModule_AddIntConstant(m, "KIND_INT", KIND_INT) < 0 ||
        PyModule_AddIntConstant(m, "KIND_PERCENT", KIND_PERCENT) < 0 ||
        PyModule_AddIntConstant(m, "KIND_OTHER", KIND_OTHER) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
