/* Native twin of measure/legacy_parse.reference_parse: float64 values -> the value the reference's lossy parse
 * of their Python text gives (see legacy_parse.py for the rules). The texts are orjson's shortest digits (the
 * digits repr chooses) in repr's layout. Bit-identical to the numpy version (tests/measure/test_legacy_parse.py).
 * Also the statistics cells of measure/stats.py around that parse (stat_close, stat_cells; its numpy code is
 * their twin, tests/measure/test_stats.py). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

#define MAX_DIGITS 17

static double pow10_table[309];

static double scale(double acc, int exponent) {
    double r;
    if (exponent > 308) return Py_NAN;
    if (exponent > 0) {
        r = acc * pow10_table[exponent];
    } else if (exponent < -308) {
        if (exponent < -616) return 0.0;
        r = acc / pow10_table[-308 - exponent] / pow10_table[308];
    } else {
        r = acc / pow10_table[-exponent];
    }
    return Py_IS_INFINITY(r) ? Py_NAN : r;
}

#define EXACT_DIGITS 15 /* 10**15 < 2**53: up to here every step acc * 10 + d of the double is exact */

/* One mantissa digit: into the integer while it is exact, then into the double, each step rounded; none after
 * MAX_DIGITS. */
static inline void take_digit(int d, unsigned long long *exact, double *acc, int *kept) {
    if (*kept < EXACT_DIGITS) {
        *exact = *exact * 10 + (unsigned)d;
    } else if (*kept < MAX_DIGITS) {
        if (*kept == EXACT_DIGITS) *acc = (double)*exact;
        *acc = *acc * 10.0 + d;
    } else {
        return;
    }
    (*kept)++;
}

/* [-]d+[.d+][e[+-]d+] as Python's repr writes it. The first EXACT_DIGITS digits are accumulated as an integer
 * (the double steps would give exactly that integer, without their chain of rounded multiplies and adds). */
static double parse_repr(const char *s) {
    int negative = *s == '-';
    if (negative) s++;
    unsigned long long exact = 0;
    double acc = 0.0;
    int kept = 0, int_digits = 0, exp10 = 0;
    for (; *s >= '0' && *s <= '9'; s++, int_digits++) take_digit(*s - '0', &exact, &acc, &kept);
    if (*s == '.')
        for (s++; *s >= '0' && *s <= '9'; s++) take_digit(*s - '0', &exact, &acc, &kept);
    if (kept <= EXACT_DIGITS) acc = (double)exact;
    if (*s == 'e') {
        s++;
        int eneg = *s == '-';
        if (*s == '+' || *s == '-') s++;
        for (; *s >= '0' && *s <= '9'; s++) exp10 = exp10 * 10 + (*s - '0');
        if (eneg) exp10 = -exp10;
    }
    if (negative) acc = -acc;
    return scale(acc, int_digits - kept + exp10);
}

/* Python's repr of a finite float from orjson's shortest-digit text of it (as _csvrows.c: same digits, repr's
 * layout for exponents and for 1e-5 <= |x| < 1e-4), into buf (NUL-terminated). Returns 0, or -1 if too long. */
static int repr_from_orjson(const char *t, Py_ssize_t n, char *buf, size_t size) {
    size_t k = 0;
#define PUT(c)                          \
    do {                                \
        if (k + 1 >= size) return -1;   \
        buf[k++] = (c);                 \
    } while (0)
    const char *e = memchr(t, 'e', (size_t)n);
    if (e) {
        for (const char *q = t; q <= e; q++) PUT(*q);
        const char *x = e + 1;
        int neg = x < t + n && *x == '-';
        if (neg || (x < t + n && *x == '+')) x++;
        PUT(neg ? '-' : '+');
        if (t + n - x < 2) PUT('0');
        for (; x < t + n; x++) PUT(*x);
    } else {
        int neg = n > 0 && *t == '-';
        const char *u = t + neg;
        Py_ssize_t un = n - neg;
        if (un > 6 && memcmp(u, "0.0000", 6) == 0 && u[6] >= '1' && u[6] <= '9') {
            if (neg) PUT('-');
            PUT(u[6]);
            if (un > 7) {
                PUT('.');
                for (Py_ssize_t i = 7; i < un; i++) PUT(u[i]);
            }
            PUT('e');
            PUT('-');
            PUT('0');
            PUT('5');
        } else {
            for (Py_ssize_t i = 0; i < n; i++) PUT(t[i]);
        }
    }
#undef PUT
    buf[k] = 0;
    return 0;
}

/* reference_parse_orjson(text, dst): dst[i] = the reference's parse of the repr of the i-th number of orjson's
 * array text "[a,b,...]" of finite float64 values (the shortest digits, as repr's, without repr's cost). */
static PyObject *reference_parse_orjson(PyObject *self, PyObject *args) {
    const char *text;
    Py_ssize_t len;
    Py_buffer out;
    if (!PyArg_ParseTuple(args, "y#w*", &text, &len, &out)) return NULL;
    PyObject *result = NULL;
    double *dst = (double *)out.buf;
    Py_ssize_t n = out.len / (Py_ssize_t)sizeof(double), i = 0;
    const char *p = text + 1, *end = text + len - 1; /* inside the brackets */
    if (len < 2 || text[0] != '[' || text[len - 1] != ']') goto bad;
    while (i < n && p < end) {
        const char *q = p;
        while (q < end && *q != ',') q++;
        char buf[64];
        if (repr_from_orjson(p, q - p, buf, sizeof(buf)) < 0 || !(buf[0] == '-' || (buf[0] >= '0' && buf[0] <= '9')))
            goto bad;
        dst[i++] = parse_repr(buf);
        p = q < end ? q + 1 : q;
    }
    if (i != n || p != end) goto bad;
    Py_INCREF(Py_None);
    result = Py_None;
    goto done;
bad:
    PyErr_SetString(PyExc_ValueError, "reference_parse_orjson: not orjson's text of that many finite numbers");
done:
    PyBuffer_Release(&out);
    return result;
}

/* -- the statistics cells of measure/stats.py (its numpy code is the twin; tests/measure/test_stats.py runs both) --
 * Rows of four cells; every buffer C-contiguous: values float64, kinds int8 (StatKind), cells int8 (stats.Cell). */
enum { K_NUMBER = 0, K_INT = 1, K_NAN = 2, K_NONE = 3 };
enum { C_VALUE = 0, C_INT = 1, C_NAN = 2, C_NA = 3 };
#define CANCELLATION 1e-3
#define MAGNITUDE_EPS 1e-10
#define WARN_MAGNITUDE 0.5

static int cells_of(Py_buffer *b, Py_ssize_t itemsize, Py_ssize_t cells, const char *what) {
    if (b->len != cells * itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes where %zd were expected", what, b->len, cells * itemsize);
        return -1;
    }
    return 0;
}

/* stat_close(n_val, n_kind, b_num, b_kind, n_num, close) -> count: n_num = the NPU values with NaN where their kind
 * is NAN, b_num likewise in place, close = both NUMBER, unequal, |N - B| < CANCELLATION * max(|N|, |B|). */
static PyObject *stat_close(PyObject *self, PyObject *args) {
    Py_buffer nv, nk, bn, bk, nn, cl;
    if (!PyArg_ParseTuple(args, "y*y*w*y*w*w*", &nv, &nk, &bn, &bk, &nn, &cl)) return NULL;
    Py_ssize_t cells = nk.len, count = 0;
    PyObject *result = NULL;
    if (cells_of(&nv, 8, cells, "n_val") < 0 || cells_of(&bn, 8, cells, "b_num") < 0 ||
        cells_of(&bk, 1, cells, "b_kind") < 0 || cells_of(&nn, 8, cells, "n_num") < 0 ||
        cells_of(&cl, 1, cells, "close") < 0)
        goto done;
    const double *x = nv.buf;
    const signed char *a = nk.buf, *b = bk.buf;
    double *y = bn.buf, *out = nn.buf;
    unsigned char *close = cl.buf;
    for (Py_ssize_t i = 0; i < cells; i++) {
        double u = a[i] == K_NAN ? Py_NAN : x[i], v = b[i] == K_NAN ? Py_NAN : y[i];
        out[i] = u;
        y[i] = v;
        int c = 0;
        if (a[i] == K_NUMBER && b[i] == K_NUMBER && u != v) {
            double au = fabs(u), av = fabs(v), m = (isnan(au) || isnan(av)) ? Py_NAN : (au >= av ? au : av);
            c = fabs(u - v) < CANCELLATION * m;
        }
        close[i] = (unsigned char)c;
        count += c;
    }
    result = PyLong_FromSsize_t(count);
done:
    PyBuffer_Release(&nv);
    PyBuffer_Release(&nk);
    PyBuffer_Release(&bn);
    PyBuffer_Release(&bk);
    PyBuffer_Release(&nn);
    PyBuffer_Release(&cl);
    return result;
}

/* stat_cells(n_num, b_num, n_kind, b_kind, diff, diff_kind, rel, rel_kind, warning): per cell diff = N - B,
 * rel = |(N - B) / B * 100|, the kinds, and per row of four whether a valued cell's |diff| / (|max(N, B)| + eps)
 * exceeds WARN_MAGNITUDE (the arithmetic of stats._diffs, operation by operation). */
static PyObject *stat_cells(PyObject *self, PyObject *args) {
    Py_buffer nn, bn, nk, bk, df, dk, rl, rk, wr;
    if (!PyArg_ParseTuple(args, "y*y*y*y*w*w*w*w*w*", &nn, &bn, &nk, &bk, &df, &dk, &rl, &rk, &wr)) return NULL;
    Py_ssize_t cells = nk.len;
    PyObject *result = NULL;
    if (cells % 4 || cells_of(&nn, 8, cells, "n_num") < 0 || cells_of(&bn, 8, cells, "b_num") < 0 ||
        cells_of(&bk, 1, cells, "b_kind") < 0 || cells_of(&df, 8, cells, "diff") < 0 ||
        cells_of(&dk, 1, cells, "diff_kind") < 0 || cells_of(&rl, 8, cells, "rel") < 0 ||
        cells_of(&rk, 1, cells, "rel_kind") < 0 || cells_of(&wr, 1, cells / 4, "warning") < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "stat_cells: rows of four cells");
        goto done;
    }
    const double *u = nn.buf, *v = bn.buf;
    const signed char *a = nk.buf, *b = bk.buf;
    double *diff = df.buf, *rel = rl.buf;
    signed char *dkind = dk.buf, *rkind = rk.buf;
    unsigned char *warn = wr.buf;
    for (Py_ssize_t r = 0; r < cells / 4; r++) {
        int w = 0;
        for (Py_ssize_t i = 4 * r; i < 4 * r + 4; i++) {
            double d = u[i] - v[i];
            diff[i] = d;
            rel[i] = fabs(d / v[i] * 100.0);
            int numeric = a[i] < K_NONE && b[i] < K_NONE;
            int k = !numeric ? C_NA : isnan(d) ? C_NAN : (a[i] == K_INT && b[i] == K_INT) ? C_INT : C_VALUE;
            dkind[i] = (signed char)k;
            int rkd = k == C_INT ? C_VALUE : k;
            rkind[i] = (signed char)(rkd == C_VALUE && v[i] == 0 ? C_NA : rkd);
            if (k == C_VALUE || k == C_INT) {
                double m = (isnan(u[i]) || isnan(v[i])) ? Py_NAN : (u[i] >= v[i] ? u[i] : v[i]);
                w |= fabs(d) / (fabs(m) + MAGNITUDE_EPS) > WARN_MAGNITUDE;
            }
        }
        warn[r] = (unsigned char)w;
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&nn);
    PyBuffer_Release(&bn);
    PyBuffer_Release(&nk);
    PyBuffer_Release(&bk);
    PyBuffer_Release(&df);
    PyBuffer_Release(&dk);
    PyBuffer_Release(&rl);
    PyBuffer_Release(&rk);
    PyBuffer_Release(&wr);
    return result;
}

static PyMethodDef methods[] = {
    {"reference_parse_orjson", reference_parse_orjson, METH_VARARGS,
     "reference_parse_orjson(text, dst): the parse of each number of orjson's array text of finite floats"},
    {"stat_close", stat_close, METH_VARARGS,
     "stat_close(n_val, n_kind, b_num, b_kind, n_num, close) -> cells whose diff cancels (stats._as_reference_reads)"},
    {"stat_cells", stat_cells, METH_VARARGS,
     "stat_cells(n_num, b_num, n_kind, b_kind, diff, diff_kind, rel, rel_kind, warning): stats._diffs' cells"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_legacyparse", "The reference's lossy number parse.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__legacyparse(void) {
    for (int k = 0; k <= 308; k++) {
        char lit[8];
        snprintf(lit, sizeof(lit), "1e%d", k);
        pow10_table[k] = strtod(lit, NULL); /* correctly rounded, as the literals 1e0..1e308 */
    }
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    const char *names[] = {"K_NUMBER", "K_INT", "K_NAN", "K_NONE", "C_VALUE", "C_INT", "C_NAN", "C_NA"};
    const int values[] = {K_NUMBER, K_INT, K_NAN, K_NONE, C_VALUE, C_INT, C_NAN, C_NA};
    for (int k = 0; k < 8; k++)
        if (PyModule_AddIntConstant(m, names[k], values[k]) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    if (PyModule_AddObject(m, "CONSTANTS", Py_BuildValue("(ddd)", CANCELLATION, MAGNITUDE_EPS, WARN_MAGNITUDE)) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
