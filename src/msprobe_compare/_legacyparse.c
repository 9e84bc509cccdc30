/* Native twin of measure/legacy_parse.reference_parse: float64 values -> the value the reference's lossy parse
 * of their Python text gives (see legacy_parse.py for the rules). Bit-identical to the Python version
 * (tests/measure/test_legacy_parse_native.py). */
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

/* [-]d+[.d+][e[+-]d+] as Python's repr writes it. */
static double parse_repr(const char *s) {
    int negative = *s == '-';
    if (negative) s++;
    double acc = 0.0;
    int kept = 0, int_digits = 0, exp10 = 0;
    for (; *s >= '0' && *s <= '9'; s++, int_digits++)
        if (kept < MAX_DIGITS) {
            acc = acc * 10.0 + (*s - '0');
            kept++;
        }
    if (*s == '.')
        for (s++; *s >= '0' && *s <= '9'; s++)
            if (kept < MAX_DIGITS) {
                acc = acc * 10.0 + (*s - '0');
                kept++;
            }
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

static PyObject *reference_parse(PyObject *self, PyObject *args) {
    Py_buffer in, out;
    if (!PyArg_ParseTuple(args, "y*w*", &in, &out)) return NULL;
    PyObject *result = NULL;
    if (in.len != out.len || in.len % (Py_ssize_t)sizeof(double) != 0) {
        PyErr_SetString(PyExc_ValueError, "reference_parse: buffers of float64 of the same length expected");
        goto done;
    }
    const double *src = (const double *)in.buf;
    double *dst = (double *)out.buf;
    Py_ssize_t n = in.len / (Py_ssize_t)sizeof(double);
    for (Py_ssize_t i = 0; i < n; i++) {
        double v = src[i];
        if (!Py_IS_FINITE(v)) {
            dst[i] = v;
            continue;
        }
        char *text = PyOS_double_to_string(v, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
        if (!text) goto done;
        dst[i] = parse_repr(text);
        PyMem_Free(text);
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&in);
    PyBuffer_Release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"reference_parse", reference_parse, METH_VARARGS,
     "reference_parse(src, dst): dst[i] = the reference's parse of repr(src[i]) (float64 buffers, C order)"},
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
