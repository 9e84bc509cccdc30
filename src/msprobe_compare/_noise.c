/* Native twins of the root cause's row passes (judge/noise.py, judge/calls.py, judge/floors.py; their
 * numpy code is the twin and tests/judge/test_noise_native.py runs both on the same inputs, bit for bit).
 *
 * stat_measures(n_stats, n_kind, b_stats, b_kind, match, n_bits, b_bits, n_unit, b_unit, size,
 *               diff, quant, unit, nonfinite, nonfinite_any)
 *     noise.stat_measures' per-row arithmetic, operation by operation: rows of four statistics (Max, Min, Mean,
 *     Norm; float64, kinds int8 StatKind), the bench row of each NPU row (`match`, int64, -1: none), the mantissa
 *     bits of each side's recorded statistics (int8), each side's unit roundoff and the element count (float64);
 *     out: diff and quant (n, 3) float64, unit (n) float64, the two NaN/Inf masks (n) bool.
 * stat_calls(n_stats, n_kind, b_stats, b_kind, match, n_bits, b_bits, n_unit, b_unit, size, row_flags, starts,
 *            diff, nonfinite, in_d, out_d, q_in, q_all, unit, flags)
 *     calls.measure_calls' statistics-mode row passes in one: each row measured as stat_measures does (diff (n, 3)
 *     and nonfinite (n) out; NaN for rows that are no tensor, bit 1 of row_flags (uint8), and for in-place
 *     artefacts: rows of bit 8 that differ), then reduced over each run of rows [starts[t], starts[t + 1]) as
 *     seg_max reduces: the largest difference of the input rows (bit 2) and of the output rows (bit 4), -inf when
 *     none; the largest resolution of the input rows and of all tensor rows, and the largest unit roundoff of the
 *     paired tensor rows, 0 when none (all (runs, 3) or (runs) float64); and per run the bits (uint8) NaN/Inf on
 *     one side in an input (1) or output (2), on either side in an input (4), some measure (8), an input (16) or
 *     output (32) that differs, an output measured (64). The runs cover the rows from row 0.
 * coarse_bits(stats, kinds, bits, low, largest) -> changed
 *     noise.stat_bits' test, row by row: each row of more than `low` mantissa bits (int8, changed in place) whose
 *     numeric statistics are all values of a `low`-bit format no larger than `largest`, one of them not a short
 *     binary fraction, gets `low` bits.
 * seg_max(values, mask, starts, fill, out)
 *     the largest of each column of `values` (n, k) over the rows of `mask` in each run of rows
 *     [starts[t], starts[t + 1]) (the last to n), NaN and unmasked rows counting as `fill`: `_PerEntry.max`'s
 *     np.maximum.reduceat over np.where(mask & ~isnan(values), values, fill); a zero maximum is +0 (reduceat's
 *     order, which decides the sign of a zero among zeros, is its own); out (runs, k).
 * running_floor(in_d, out_d, order, prior, prior_src)
 *     floors.running_floor: per call (rows of in_d/out_d, (calls, k) float64) and column, the largest finite
 *     difference of the calls before it in `order` (intp) and the call that set it (int64, -1: none above 0).
 * margins(in_d, out_d, prior, q_in, q_all, ufl, weight, floor_in, floor_out, r_in, r_out, c_in, c_out, worst_in)
 *     floors.margins: per call the floors of its inputs and outputs, their differences over the floors (times
 *     each measure's weight), the largest of those and the measure that has it (the first, as argmax), and the
 *     largest input difference (NaN counting as -inf).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

enum { K_NUMBER = 0, K_INT = 1, K_NAN = 2, K_NONE = 3 };

static int sized(Py_buffer *b, Py_ssize_t itemsize, Py_ssize_t items, const char *what) {
    if (b->len != items * itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes where %zd were expected", what, b->len, items * itemsize);
        return -1;
    }
    return 0;
}

/* np.maximum: NaN when either is NaN, else the larger (the first when equal) */
static inline double nmax(double a, double b) { return (a >= b || a != a) ? a : b; }

/* noise.ulp for one value: one ulp in a format of `bits` mantissa bits (0 bits or a zero value: 0) */
static inline double ulp1(double v, int bits) {
    if (bits <= 0 || v == 0) return 0.0;
    uint64_t u;
    memcpy(&u, &v, 8);
    int64_t biased = (int64_t)((u >> 52) & 0x7ff), p;
    if (biased == 0x7ff) { /* NaN, Inf: frexp of 0, exponent 0 */
        p = -1 - (int64_t)bits;
    } else if (biased == 0) { /* subnormal: frexp's exponent */
        int e;
        frexp(v, &e);
        p = (int64_t)e - 1 - (int64_t)bits;
    } else {
        p = biased - 1022 - 1 - (int64_t)bits; /* frexp: v = m 2^e, 0.5 <= |m| < 1, e = biased - 1022 */
    }
    if (p < -1022 || p > 1023) return ldexp(1.0, (int)p); /* subnormal, zero or infinite: as ldexp gives */
    uint64_t r = (uint64_t)(p + 1023) << 52; /* 2^p exactly */
    double out;
    memcpy(&out, &r, 8);
    return out;
}

/* noise._finite for one row: no NaN statistic, no infinite numeric one */
static inline int finite_row(const double *v, const signed char *k) {
    for (int c = 0; c < 4; c++)
        if (k[c] == K_NAN || (fabs(v[c]) == INFINITY && k[c] <= K_INT)) return 0;
    return 1;
}

/* noise.finite_data for one row: no NaN/Inf in the data. Max and Min are elements of the tensor, so they say it
 * where both are numeric; a Norm or Mean computed in the tensor's own low precision can overflow while every element
 * is finite (an fp16 Norm of -1e4-masked scores is inf). Without a numeric Max and Min: every statistic, as
 * finite_row */
static inline int finite_data(const double *v, const signed char *k) {
    if (k[0] <= K_NAN && k[1] <= K_NAN)
        return k[0] != K_NAN && k[1] != K_NAN && fabs(v[0]) != INFINITY && fabs(v[1]) != INFINITY;
    return finite_row(v, k);
}

/* noise.stat_valid for statistic c (2: Mean, 3: Norm) of a row whose data is finite: a value the data can have
 * (not NaN/Inf; a Norm at least half the largest |element|: below it the dumper's precision under- or overflowed) */
static inline int stat_valid(const double *v, const signed char *k, int c) {
    if (k[c] > K_INT || fabs(v[c]) == INFINITY) return 0;
    return c != 3 || !(fabs(v[3]) < 0.5 * nmax(fabs(v[0]), fabs(v[1])));
}

/* noise.stat_measures for NPU row i against bench row j (-1: none; m bench rows): the three measures and their
 * resolutions into d[3] and q[3], the two NaN/Inf flags; returns the row's unit roundoff */
static inline double measure_row(const double *nvs, const signed char *nks, const double *bvs, const signed char *bks,
                                 const signed char *nbits, const signed char *bbits, const double *nunit,
                                 const double *bunit, const double *size, Py_ssize_t i, int64_t j, Py_ssize_t m,
                                 double *d, double *q, int *nfin_out, int *nfany_out) {
    double unit = nmax(nunit[i], m ? bunit[j >= 0 ? j : 0] : 0.0);
    *nfin_out = *nfany_out = 0;
    if (j < 0) {
        d[0] = d[1] = d[2] = q[0] = q[1] = q[2] = Py_NAN;
        return unit;
    }
    const double *a = nvs + 4 * i, *b = bvs + 4 * j;
    const signed char *ka = nks + 4 * i, *kb = bks + 4 * j;
    int fa = finite_data(a, ka), fb = finite_data(b, kb);
    int nfin = fa != fb, nfany = !(fa && fb);
    *nfin_out = nfin;
    *nfany_out = nfany;
    int ok = !nfany;
    for (int c = 0; c < 4; c++) ok &= ka[c] <= K_NAN && kb[c] <= K_NAN;
    if (!ok) {
        d[0] = d[1] = d[2] = nfin ? INFINITY : Py_NAN;
        q[0] = q[1] = q[2] = Py_NAN;
        return unit;
    }
    int bn = nbits[i], bbn = bbits[j];
    int norm_a = stat_valid(a, ka, 3), norm_b_ok = stat_valid(b, kb, 3);
    double amax = nmax(nmax(fabs(a[0]), fabs(a[1])), nmax(fabs(b[0]), fabs(b[1])));
    double norm_n = fabs(a[3]), norm_b = fabs(b[3]);
    /* the scale of the Mean change: the larger valid Norm, else the largest element (a bound of the RMS) */
    double scale = norm_a && norm_b_ok ? nmax(norm_n, norm_b) : norm_a ? norm_n : norm_b_ok ? norm_b : amax;
    double safe = scale > 0 ? scale : 1.0;
    if (norm_a && norm_b_ok) {
        d[0] = norm_n == norm_b ? 0.0 : fabs(norm_n - norm_b) / safe;
        q[0] = nmax(ulp1(norm_n, bn), ulp1(norm_b, bbn)) / safe;
    } else { /* a Norm the dumper's precision could not hold: unknown, the other measures still judge */
        d[0] = q[0] = Py_NAN;
    }
    double rms = scale / sqrt(norm_a || norm_b_ok ? nmax(size[i], 1.0) : 1.0);
    double safe_rms = rms > 0 ? rms : 1.0;
    if (stat_valid(a, ka, 2) && stat_valid(b, kb, 2)) {
        d[1] = a[2] == b[2] ? 0.0 : fabs(a[2] - b[2]) / safe_rms;
        q[1] = nmax(ulp1(a[2], bn), ulp1(b[2], bbn)) / safe_rms;
    } else {
        d[1] = q[1] = Py_NAN;
    }
    double safe_amax = amax > 0 ? amax : 1.0;
    d[2] = nmax(fabs(a[0] - b[0]), fabs(a[1] - b[1])) / safe_amax;
    q[2] = nmax(ulp1(amax, bn), ulp1(amax, bbn)) / safe_amax;
    return unit;
}

static PyObject *stat_measures(PyObject *self, PyObject *args) {
    Py_buffer nv, nk, bv, bk, mt, nb, bb, nu, bu, sz, df, qt, un, nf, na;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*y*y*y*w*w*w*w*w*", &nv, &nk, &bv, &bk, &mt, &nb, &bb, &nu, &bu, &sz,
                          &df, &qt, &un, &nf, &na))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = mt.len / 8, m = bk.len / 4;
    if (mt.len % 8 || bk.len % 4 || sized(&nv, 32, n, "n_stats") < 0 || sized(&nk, 4, n, "n_kind") < 0 ||
        sized(&bv, 32, m, "b_stats") < 0 || sized(&nb, 1, n, "n_bits") < 0 || sized(&bb, 1, m, "b_bits") < 0 ||
        sized(&nu, 8, n, "n_unit") < 0 || sized(&bu, 8, m, "b_unit") < 0 || sized(&sz, 8, n, "size") < 0 ||
        sized(&df, 24, n, "diff") < 0 || sized(&qt, 24, n, "quant") < 0 || sized(&un, 8, n, "unit") < 0 ||
        sized(&nf, 1, n, "nonfinite") < 0 || sized(&na, 1, n, "nonfinite_any") < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "stat_measures: rows of four statistics");
        goto done;
    }
    const double *nvs = nv.buf, *bvs = bv.buf, *nunit = nu.buf, *bunit = bu.buf, *size = sz.buf;
    const signed char *nks = nk.buf, *bks = bk.buf, *nbits = nb.buf, *bbits = bb.buf;
    const int64_t *match = mt.buf;
    double *diff = df.buf, *quant = qt.buf, *unit = un.buf;
    unsigned char *nonfinite = nf.buf, *nonfinite_any = na.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t j = match[i];
        int hit = j >= 0 && j < m;
        int nfin, nfany;
        unit[i] = measure_row(nvs, nks, bvs, bks, nbits, bbits, nunit, bunit, size, i, hit ? j : -1, m, diff + 3 * i,
                              quant + 3 * i, &nfin, &nfany);
        nonfinite[i] = (unsigned char)nfin;
        nonfinite_any[i] = (unsigned char)nfany;
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&nv);
    PyBuffer_Release(&nk);
    PyBuffer_Release(&bv);
    PyBuffer_Release(&bk);
    PyBuffer_Release(&mt);
    PyBuffer_Release(&nb);
    PyBuffer_Release(&bb);
    PyBuffer_Release(&nu);
    PyBuffer_Release(&bu);
    PyBuffer_Release(&sz);
    PyBuffer_Release(&df);
    PyBuffer_Release(&qt);
    PyBuffer_Release(&un);
    PyBuffer_Release(&nf);
    PyBuffer_Release(&na);
    return result;
}

/* row flags of stat_calls */
enum { R_TENSOR = 1, R_INPUT = 2, R_OUTPUT = 4, R_ARTIFACT = 8 };
/* per-run flags of stat_calls, in calls.measure_calls' order */
enum { C_NF_IN = 1, C_NF_OUT = 2, C_NF_IN_ANY = 4, C_KNOWN = 8, C_IN_DIFF = 16, C_OUT_DIFF = 32, C_HAS_OUT = 64 };

static inline double masked_max(double acc, int take, double x, double fill) {
    double y = (take && !isnan(x)) ? x : fill;
    return acc >= y ? acc : y;
}

static PyObject *stat_calls(PyObject *self, PyObject *args) {
    Py_buffer nv, nk, bv, bk, mt, nb, bb, nu, bu, sz, rf, st, df, nf, ib, ob, qib, qab, ub, fb;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*y*y*y*y*y*w*w*w*w*w*w*w*w*", &nv, &nk, &bv, &bk, &mt, &nb, &bb, &nu,
                          &bu, &sz, &rf, &st, &df, &nf, &ib, &ob, &qib, &qab, &ub, &fb))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = mt.len / 8, m = bk.len / 4, runs = st.len / (Py_ssize_t)sizeof(Py_ssize_t);
    if (mt.len % 8 || bk.len % 4 || st.len % (Py_ssize_t)sizeof(Py_ssize_t) || sized(&nv, 32, n, "n_stats") < 0 ||
        sized(&nk, 4, n, "n_kind") < 0 || sized(&bv, 32, m, "b_stats") < 0 || sized(&nb, 1, n, "n_bits") < 0 ||
        sized(&bb, 1, m, "b_bits") < 0 || sized(&nu, 8, n, "n_unit") < 0 || sized(&bu, 8, m, "b_unit") < 0 ||
        sized(&sz, 8, n, "size") < 0 || sized(&rf, 1, n, "row_flags") < 0 || sized(&df, 24, n, "diff") < 0 ||
        sized(&nf, 1, n, "nonfinite") < 0 || sized(&ib, 24, runs, "in_d") < 0 || sized(&ob, 24, runs, "out_d") < 0 ||
        sized(&qib, 24, runs, "q_in") < 0 || sized(&qab, 24, runs, "q_all") < 0 || sized(&ub, 8, runs, "unit") < 0 ||
        sized(&fb, 1, runs, "flags") < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "stat_calls: rows of four statistics");
        goto done;
    }
    const Py_ssize_t *starts = st.buf;
    if ((n == 0) != (runs == 0) || (runs && starts[0] != 0)) {
        PyErr_SetString(PyExc_ValueError, "stat_calls: the runs must cover the rows from row 0");
        goto done;
    }
    for (Py_ssize_t t = 0; t < runs; t++) {
        Py_ssize_t lo = starts[t], hi = t + 1 < runs ? starts[t + 1] : n;
        if (lo < 0 || lo >= n || hi <= lo || hi > n) {
            PyErr_SetString(PyExc_ValueError, "stat_calls: the run starts must increase within the rows");
            goto done;
        }
    }
    const double *nvs = nv.buf, *bvs = bv.buf, *nunit = nu.buf, *bunit = bu.buf, *size = sz.buf;
    const signed char *nks = nk.buf, *bks = bk.buf, *nbits = nb.buf, *bbits = bb.buf;
    const unsigned char *rows = rf.buf;
    const int64_t *match = mt.buf;
    double *diff = df.buf, *in_d = ib.buf, *out_d = ob.buf, *q_in = qib.buf, *q_all = qab.buf, *unit = ub.buf;
    unsigned char *nonfinite = nf.buf, *flags = fb.buf;
    for (Py_ssize_t t = 0; t < runs; t++) {
        Py_ssize_t lo = starts[t], hi = t + 1 < runs ? starts[t + 1] : n;
        double acc_in[3] = {-INFINITY, -INFINITY, -INFINITY}, acc_out[3] = {-INFINITY, -INFINITY, -INFINITY};
        double acc_qi[3] = {0.0, 0.0, 0.0}, acc_qa[3] = {0.0, 0.0, 0.0}, acc_u = 0.0;
        unsigned char f = 0;
        for (Py_ssize_t i = lo; i < hi; i++) {
            int64_t j = match[i];
            int hit = j >= 0 && j < m;
            int nfin, nfany;
            double *d = diff + 3 * i, q[3];
            double u = measure_row(nvs, nks, bvs, bks, nbits, bbits, nunit, bunit, size, i, hit ? j : -1, m, d, q,
                                   &nfin, &nfany);
            nonfinite[i] = (unsigned char)nfin;
            int tensor = rows[i] & R_TENSOR, tin = tensor && (rows[i] & R_INPUT), tout = tensor && (rows[i] & R_OUTPUT);
            if (!tensor) d[0] = d[1] = d[2] = Py_NAN;
            int differs = d[0] > 0 || d[1] > 0 || d[2] > 0; /* NaN compares false */
            int artifact = differs && (rows[i] & R_ARTIFACT);
            if (artifact) {
                d[0] = d[1] = d[2] = Py_NAN;
                differs = 0;
            }
            int measured = !(isnan(d[0]) && isnan(d[1]) && isnan(d[2]));
            for (int c = 0; c < 3; c++) {
                double qc = isnan(d[c]) ? Py_NAN : q[c];
                acc_in[c] = masked_max(acc_in[c], tin, d[c], -INFINITY);
                acc_out[c] = masked_max(acc_out[c], tout, d[c], -INFINITY);
                acc_qi[c] = masked_max(acc_qi[c], tin, qc, 0.0);
                acc_qa[c] = masked_max(acc_qa[c], tensor, qc, 0.0);
            }
            acc_u = masked_max(acc_u, tensor && hit, u, 0.0);
            if (tin && nfin && !artifact) f |= C_NF_IN;
            if (tout && nfin) f |= C_NF_OUT;
            if (tin && nfany && !artifact) f |= C_NF_IN_ANY;
            if (measured) f |= C_KNOWN;
            if (tin && differs) f |= C_IN_DIFF;
            if (tout && differs) f |= C_OUT_DIFF;
            if (tout && measured) f |= C_HAS_OUT;
        }
        for (int c = 0; c < 3; c++) { /* a zero maximum is +0, as seg_max gives it */
            in_d[3 * t + c] = acc_in[c] + 0.0;
            out_d[3 * t + c] = acc_out[c] + 0.0;
            q_in[3 * t + c] = acc_qi[c] + 0.0;
            q_all[3 * t + c] = acc_qa[c] + 0.0;
        }
        unit[t] = acc_u + 0.0;
        flags[t] = f;
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&nv);
    PyBuffer_Release(&nk);
    PyBuffer_Release(&bv);
    PyBuffer_Release(&bk);
    PyBuffer_Release(&mt);
    PyBuffer_Release(&nb);
    PyBuffer_Release(&bb);
    PyBuffer_Release(&nu);
    PyBuffer_Release(&bu);
    PyBuffer_Release(&sz);
    PyBuffer_Release(&rf);
    PyBuffer_Release(&st);
    PyBuffer_Release(&df);
    PyBuffer_Release(&nf);
    PyBuffer_Release(&ib);
    PyBuffer_Release(&ob);
    PyBuffer_Release(&qib);
    PyBuffer_Release(&qab);
    PyBuffer_Release(&ub);
    PyBuffer_Release(&fb);
    return result;
}

/* whether x is a whole number (x finite) */
static inline int whole(double x) { return x == floor(x); }

static PyObject *coarse_bits(PyObject *self, PyObject *args) {
    Py_buffer vb, kb, bb;
    int low;
    double largest;
    if (!PyArg_ParseTuple(args, "y*y*w*id", &vb, &kb, &bb, &low, &largest)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = bb.len;
    if (sized(&vb, 32, n, "stats") < 0 || sized(&kb, 4, n, "kinds") < 0) goto done;
    if (low < 1 || low > 52) {
        PyErr_SetString(PyExc_ValueError, "coarse_bits: low must be 1..52 mantissa bits");
        goto done;
    }
    const double *vals = vb.buf;
    const signed char *kinds = kb.buf;
    signed char *bits = bb.buf;
    Py_ssize_t changed = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (bits[i] <= low) continue;
        int all_exact = 1, any_long = 0;
        for (int c = 0; c < 4 && all_exact; c++) {
            double v = vals[4 * i + c];
            if (kinds[4 * i + c] != K_NUMBER || !isfinite(v)) continue; /* not a number: no evidence either way */
            int e;
            double mant = frexp(v, &e);
            int exact = whole(ldexp(mant, low + 1)) && fabs(v) <= largest;
            if (low == 10 && fabs(v) < 0x1p-14) exact &= whole(ldexp(v, 24)); /* float16 subnormals */
            all_exact &= exact;
            any_long |= !whole(ldexp(mant, low / 2 + 1));
        }
        if (all_exact && any_long) {
            bits[i] = (signed char)low;
            changed++;
        }
    }
    result = PyLong_FromSsize_t(changed);
done:
    PyBuffer_Release(&vb);
    PyBuffer_Release(&kb);
    PyBuffer_Release(&bb);
    return result;
}

static PyObject *seg_max(PyObject *self, PyObject *args) {
    Py_buffer vb, mb, sb, ob;
    double fill;
    if (!PyArg_ParseTuple(args, "y*y*y*dw*", &vb, &mb, &sb, &fill, &ob)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = mb.len, runs = sb.len / (Py_ssize_t)sizeof(Py_ssize_t);
    Py_ssize_t k = n ? vb.len / 8 / n : 0;
    if (sb.len % (Py_ssize_t)sizeof(Py_ssize_t) || (n && vb.len != n * k * 8) || k < 1 ||
        sized(&ob, 8 * k, runs, "out") < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "seg_max: values (n, k), mask (n), out (runs, k)");
        goto done;
    }
    const double *v = vb.buf;
    const unsigned char *mask = mb.buf;
    const Py_ssize_t *starts = sb.buf;
    double *out = ob.buf;
    for (Py_ssize_t t = 0; t < runs; t++) {
        Py_ssize_t lo = starts[t], hi = t + 1 < runs ? starts[t + 1] : n;
        if (lo < 0 || lo >= n || hi <= lo || hi > n) {
            PyErr_SetString(PyExc_ValueError, "seg_max: the run starts must increase within the rows");
            goto done;
        }
        for (Py_ssize_t c = 0; c < k; c++) {
            double x = v[lo * k + c];
            double acc = (mask[lo] && !isnan(x)) ? x : fill;
            for (Py_ssize_t r = lo + 1; r < hi; r++) {
                x = v[r * k + c];
                double y = (mask[r] && !isnan(x)) ? x : fill;
                acc = acc >= y ? acc : y;
            }
            out[t * k + c] = acc + 0.0; /* a zero maximum is +0 whatever the order (numpy's reduceat may differ) */
        }
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&vb);
    PyBuffer_Release(&mb);
    PyBuffer_Release(&sb);
    PyBuffer_Release(&ob);
    return result;
}

static PyObject *running_floor(PyObject *self, PyObject *args) {
    Py_buffer ib, ob, rb, pb, sb;
    if (!PyArg_ParseTuple(args, "y*y*y*w*w*", &ib, &ob, &rb, &pb, &sb)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t e_count = rb.len / (Py_ssize_t)sizeof(Py_ssize_t);
    Py_ssize_t k = e_count ? ib.len / 8 / e_count : 0;
    if (rb.len % (Py_ssize_t)sizeof(Py_ssize_t) || k < 1 || ib.len != e_count * k * 8 ||
        sized(&ob, 8 * k, e_count, "out_d") < 0 || sized(&pb, 8 * k, e_count, "prior") < 0 ||
        sized(&sb, 8 * k, e_count, "prior_src") < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "running_floor: (calls, k) arrays, order (calls)");
        goto done;
    }
    const double *in_d = ib.buf, *out_d = ob.buf;
    const Py_ssize_t *order = rb.buf;
    double *prior = pb.buf;
    int64_t *src = sb.buf;
    for (Py_ssize_t p = 0; p < e_count; p++)
        if (order[p] < 0 || order[p] >= e_count) {
            PyErr_SetString(PyExc_ValueError, "running_floor: order holds a call out of range");
            goto done;
        }
    for (Py_ssize_t c = 0; c < k; c++) {
        double cum = 0.0;
        Py_ssize_t setter = -1;
        for (Py_ssize_t p = 0; p < e_count; p++) {
            Py_ssize_t e = order[p];
            prior[e * k + c] = p ? cum : 0.0;
            src[e * k + c] = setter >= 0 ? (int64_t)order[setter] : -1;
            double a = in_d[e * k + c], b = out_d[e * k + c];
            a = isfinite(a) ? a : 0.0;
            b = isfinite(b) ? b : 0.0;
            double seen = nmax(a, b);
            cum = p ? nmax(cum, seen) : seen;
            if (seen >= cum && seen > 0) setter = p;
        }
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&ib);
    PyBuffer_Release(&ob);
    PyBuffer_Release(&rb);
    PyBuffer_Release(&pb);
    PyBuffer_Release(&sb);
    return result;
}

static PyObject *margins(PyObject *self, PyObject *args) {
    Py_buffer ib, ob, pb, qib, qab, ub, wb, fib, fob, rib, rob, cib, cob, wib;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*w*w*w*w*w*w*w*", &ib, &ob, &pb, &qib, &qab, &ub, &wb, &fib, &fob, &rib,
                          &rob, &cib, &cob, &wib))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t e_count = ub.len / 8, k = wb.len / 8;
    if (ub.len % 8 || wb.len % 8 || k < 1 || sized(&ib, 8 * k, e_count, "in_d") < 0 ||
        sized(&ob, 8 * k, e_count, "out_d") < 0 || sized(&pb, 8 * k, e_count, "prior") < 0 ||
        sized(&qib, 8 * k, e_count, "q_in") < 0 ||
        sized(&qab, 8 * k, e_count, "q_all") < 0 || sized(&fib, 8 * k, e_count, "floor_in") < 0 ||
        sized(&fob, 8 * k, e_count, "floor_out") < 0 || sized(&rib, 8, e_count, "r_in") < 0 ||
        sized(&rob, 8, e_count, "r_out") < 0 || sized(&cib, 8, e_count, "c_in") < 0 ||
        sized(&cob, 8, e_count, "c_out") < 0 || sized(&wib, 8, e_count, "worst_in") < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "margins: (calls, k) arrays, ufl (calls), weight (k)");
        goto done;
    }
    const double *in_d = ib.buf, *out_d = ob.buf, *prior = pb.buf, *q_in = qib.buf, *q_all = qab.buf,
                 *ufl = ub.buf, *w = wb.buf;
    double *floor_in = fib.buf, *floor_out = fob.buf, *r_in = rib.buf, *r_out = rob.buf, *worst_in = wib.buf;
    int64_t *c_in = cib.buf, *c_out = cob.buf;
    for (Py_ssize_t e = 0; e < e_count; e++) {
        double best_in = 0, best_out = 0, max_in = 0, max_out = 0, worst = 0;
        int64_t at_in = 0, at_out = 0;
        for (Py_ssize_t c = 0; c < k; c++) {
            Py_ssize_t x = e * k + c;
            double fi = nmax(nmax(nmax(prior[x], 0.0), q_in[x]), ufl[e]);
            double fin_in = isfinite(in_d[x]) ? in_d[x] : 0.0;
            double fo = nmax(nmax(nmax(prior[x], fin_in), q_all[x]), ufl[e]);
            floor_in[x] = fi;
            floor_out[x] = fo;
            double a = in_d[x], b = out_d[x];
            double ri = a > 0 ? a / (fi > 0 ? fi * w[c] : INFINITY) : 0.0;
            double ro = b > 0 ? b / (fo > 0 ? fo * w[c] : INFINITY) : 0.0;
            if (!isfinite(a)) ri = 0.0;
            if (!isfinite(b)) ro = 0.0;
            if (c == 0 || ri > best_in || (ri != ri && best_in == best_in)) { /* argmax: the first largest */
                best_in = ri;
                at_in = c;
            }
            if (c == 0 || ro > best_out || (ro != ro && best_out == best_out)) {
                best_out = ro;
                at_out = c;
            }
            double wa = isfinite(a) ? a : (a > 0 ? INFINITY : -INFINITY); /* NaN: -inf */
            worst = c ? nmax(worst, wa) : wa;
            max_in = c ? nmax(max_in, ri) : ri;
            max_out = c ? nmax(max_out, ro) : ro;
        }
        r_in[e] = max_in;
        worst_in[e] = worst;
        r_out[e] = max_out;
        c_in[e] = at_in;
        c_out[e] = at_out;
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&ib);
    PyBuffer_Release(&ob);
    PyBuffer_Release(&pb);
    PyBuffer_Release(&qib);
    PyBuffer_Release(&qab);
    PyBuffer_Release(&ub);
    PyBuffer_Release(&wb);
    PyBuffer_Release(&fib);
    PyBuffer_Release(&fob);
    PyBuffer_Release(&rib);
    PyBuffer_Release(&rob);
    PyBuffer_Release(&cib);
    PyBuffer_Release(&cob);
    PyBuffer_Release(&wib);
    return result;
}

static PyMethodDef methods[] = {
    {"stat_measures", stat_measures, METH_VARARGS,
     "stat_measures(n_stats, n_kind, b_stats, b_kind, match, n_bits, b_bits, n_unit, b_unit, size, diff, quant, unit,"
     " nonfinite, nonfinite_any): noise.stat_measures' rows"},
    {"stat_calls", stat_calls, METH_VARARGS,
     "stat_calls(n_stats, n_kind, b_stats, b_kind, match, n_bits, b_bits, n_unit, b_unit, size, row_flags, starts,"
     " diff, nonfinite, in_d, out_d, q_in, q_all, unit, flags): stat_measures and the per-call maxima in one pass"},
    {"coarse_bits", coarse_bits, METH_VARARGS,
     "coarse_bits(stats, kinds, bits, low, largest) -> rows whose statistics are all values of a low-bit format"},
    {"seg_max", seg_max, METH_VARARGS,
     "seg_max(values, mask, starts, fill, out): per run of rows, each column's largest masked non-NaN value"},
    {"running_floor", running_floor, METH_VARARGS,
     "running_floor(in_d, out_d, order, prior, prior_src): floors.running_floor, one pass in execution order"},
    {"margins", margins, METH_VARARGS,
     "margins(in_d, out_d, prior, q_in, q_all, ufl, weight, floor_in, floor_out, r_in, r_out, c_in, c_out, worst_in)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_noise", "Row passes of the root cause's noise model.",
                                    -1, methods};

PyMODINIT_FUNC PyInit__noise(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    const char *names[] = {"K_NUMBER", "K_INT", "K_NAN", "K_NONE"};
    const int values[] = {K_NUMBER, K_INT, K_NAN, K_NONE};
    for (int k = 0; k < 4; k++)
        if (PyModule_AddIntConstant(m, names[k], values[k]) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    return m;
}
