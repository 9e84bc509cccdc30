/* Native twin of measure/legacy_parse.reference_parse: float64 values -> the value the reference's lossy parse
 * of their Python text gives (see legacy_parse.py for the rules). The texts are orjson's shortest digits (the
 * digits repr chooses) in repr's layout. Bit-identical to the numpy version (tests/measure/test_legacy_parse.py). */
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

static PyMethodDef methods[] = {
    {"reference_parse_orjson", reference_parse_orjson, METH_VARARGS,
     "reference_parse_orjson(text, dst): the parse of each number of orjson's array text of finite floats"},
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
    return PyModule_Create(&module);
}
