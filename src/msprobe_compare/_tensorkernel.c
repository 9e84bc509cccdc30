/* Native twin of measure/tensor_compare.py's _Accumulator for pairs whose relative error is float32: one fused
 * pass over a chunk of an NPU/bench pair whose sides are each float32 or bfloat16 (given as uint16 bit patterns).
 *
 * accumulate(npu, npu_is_bf16, bench, bench_is_bf16[, tolerance[, chunk[, sums]]]) takes two 1-D buffers of the
 * same length (buffer protocol: float32 'f' or uint16 'H' in native byte order, any stride, read-only is fine) and
 * returns
 *     (dot, nn, bb, ss, max_abs, max_rel, count1, count5, beyond)
 * = the sums of SUM_LIST (sum N*B, sum N*N, sum B*B, sum (N-B)^2) and max |N-B| in float64; the maximum of the
 * float32 relative error RE = |(N'-B')/B'| and the counts of BELOW_LIST (RE < float32(0.001), RE < float32(0.005)),
 * where N' = N + e, B' = B + e and
 * e is eps (float64 machine epsilon, in float32) where B == 0, else 0; `beyond` counts RE > float32(tolerance)
 * (the root cause's elements beyond rounding; none without a tolerance) -- or None when the NaN/inf positions of the
 * two sides differ. NaN/inf at the same positions count as 0 on both sides. The GIL is released while computing.
 *
 * Every element is computed as the numpy path computes it (IEEE float32/float64 operations, no contraction: setup.py
 * builds with -ffp-contract=off, never -ffast-math), so maxima and counts are identical. The one fused multiply-add,
 * written out in the AVX-512 pair loop for N*B, N*N and B*B, rounds once like the multiply-then-add it replaces:
 * the product of two float32 values is exact in float64 (48 significant bits, exponents far inside its range), so
 * only the addition rounds either way (not (N-B)^2: N-B may carry up to 53 bits). The sums use LANES independent
 * accumulators: within blocks of BLOCK elements, element i is added to lane i % LANES in index order; the lanes of
 * a block are added as ((l0 + l1) + (l2 + l3)), and the blocks in order. That order is the same for every stride,
 * thread and machine, and for all four loops (portable C, SSE2, AVX2, AVX-512 picked at run time), so results are
 * deterministic; it is not numpy's or BLAS's order, so sums may differ from the numpy path in the last bits. Blocks
 * are independent until they are added up, so the AVX-512 loop runs two whole blocks side by side (one block's
 * lanes in the low half of each float64 register, the other's in the high half) and then adds them in order.
 *
 * With `chunk`, the buffers are cut into chunks of that many elements, each summed as above from zero and added
 * in chunk order onto the running sums, which start at `sums` (default zeros): one call over many chunks gives
 * exactly what one call per chunk, added up in order by the caller, gives.
 *
 * Each block is first computed without NaN/inf handling; when its sums of squares come out non-finite (for float32
 * data that happens exactly when the block holds a NaN or an inf) it is computed again with the checks.
 *
 * accumulate_file(...) does the same over two files' bytes, read with pread a piece at a time into two reused buffers
 * (no memory mapping: no page faults, and the loop reads its input from the CPU caches); each piece starts at a
 * multiple of two blocks of its chunk, so the blocks, chunks and results are those of accumulate().
 *
 * LOOPS names the loops this machine can run, SIMD the one accumulate() uses; accumulate_loop(name, ...) runs a
 * given one (for tests: all of them must agree bit for bit). SUMS and THRESHOLDS name the sums and the thresholds of
 * the counts (measure/tensor_metrics.py's table; the Python side uses the kernel only where they are its own).
 *
 * Every loop is written once over the accumulator lists SUM_LIST and BELOW_LIST below (its fields, its step, its
 * start and its store, each a macro per list entry), so a new sum or count is one line there: CONTRIBUTING.md,
 * "Adding a tensor metric".
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#if !defined(_WIN32)
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#define HAVE_PREAD 1 /* accumulate_file: the pair read from two files into reused buffers */
#else
#define HAVE_PREAD 0
#endif

#if defined(__SSE2__) || defined(_M_X64)
#include <immintrin.h>
#define HAVE_SSE2 1
#else
#define HAVE_SSE2 0
#endif
#if HAVE_SSE2 && defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define HAVE_AVX2 1 /* compiled for AVX2 with a target attribute, used when the CPU has it */
#define TARGET_AVX2 __attribute__((target("avx2")))
#else
#define HAVE_AVX2 0
#endif
#if HAVE_AVX2 && (__GNUC__ >= 8 || defined(__clang__))
#define HAVE_AVX512 1 /* AVX-512 F + VL, likewise by target attribute */
#define TARGET_AVX512 __attribute__((target("avx512f,avx512vl")))
#else
#define HAVE_AVX512 0
#endif

#define LANES 4     /* independent accumulators per sum */
#define BLOCK 4096  /* elements per block, a multiple of 8; lane counters are int32 within a block */
#define MAX_WIDTH 16 /* elements per step of the widest loop */

/* The accumulators, one line each, in the order of the result tuple (measure/tensor_metrics.py: SUMS, THRESHOLDS).
 * SUM_LIST(X): X(name, x, y, how): the float64 sum of x*y, x and y each n (NPU), b (bench) or d (n - b), widened to
 *   float64; `how` FUSED where the product of the two float32 values is exact in float64 (48 significant bits), so
 *   the AVX-512 pair loop may fuse the multiply-add (it rounds once, as the addition alone does), else ROUNDED (d*d:
 *   d may carry up to 53 bits). The check for NaN/inf in a block reads nn and bb (fold_block).
 * BELOW_LIST(X): X(name, threshold): the count of float32 relative errors below (float)threshold, the numpy path's
 *   np.float32(threshold). */
#define SUM_LIST(X) X(dot, n, b, FUSED) X(nn, n, n, FUSED) X(bb, b, b, FUSED) X(ss, d, d, ROUNDED)
#define BELOW_LIST(X) X(count1, 0.001) X(count5, 0.005)
#define COUNT_ONE(...) +1
#define N_SUMS (0 SUM_LIST(COUNT_ONE))
#define N_BELOW (0 BELOW_LIST(COUNT_ONE))

/* The float32 constant of the numpy path: np.float32(FLOAT_EPSILON). */
#define EPS32 ((float)DBL_EPSILON)

#if defined(__GNUC__)
#define INLINE static inline __attribute__((always_inline))
#else
#define INLINE static inline
#endif

typedef enum { SIDE_F32 = 0, SIDE_BF16 = 1 } SideKind;
typedef enum { LOOP_PORTABLE = 0, LOOP_SSE2 = 1, LOOP_AVX2 = 2, LOOP_AVX512 = 3, N_LOOPS = 4 } LoopKind;
static const char *const LOOP_NAMES[N_LOOPS] = {"portable", "sse2", "avx2", "avx512"};

#define SIZE_OF(kind) ((kind) == SIDE_BF16 ? (Py_ssize_t)2 : (Py_ssize_t)4)

/* Results of a chunk. */
#define TOTALS_SUM(name, ...) double name;
#define TOTALS_COUNT(name, ...) int64_t name;
typedef struct {
    SUM_LIST(TOTALS_SUM)
    double max_abs;
    float max_rel;
    BELOW_LIST(TOTALS_COUNT)
    int64_t beyond;
} Totals;

/* State of one block, as every loop leaves it: LANES partial sums; maxima and counts in any lanes; `padding`
 * zero pairs processed after the data (they add 0 to every sum and maximum, and 1 to every count below). */
#define LANES_SUM(name, ...) double name[LANES];
#define LANES_COUNT(name, ...) int32_t name[MAX_WIDTH];
typedef struct {
    SUM_LIST(LANES_SUM)
    double max_abs[MAX_WIDTH];
    float max_rel[MAX_WIDTH];
    BELOW_LIST(LANES_COUNT)
    int32_t beyond[MAX_WIDTH], mismatch[MAX_WIDTH];
    int32_t padding; /* padded pairs have RE 0: never beyond a tolerance >= 0 */
} Lanes;

/* `count` (<= width) values of one side starting at p, widened to float32, then zeros up to `width`. */
INLINE void load_floats(float *out, const char *p, Py_ssize_t stride, SideKind kind, int count, int width) {
    for (int j = 0; j < width; j++) {
        if (j < count) {
            if (kind == SIDE_BF16) {
                uint16_t half;
                memcpy(&half, p + j * stride, sizeof half);
                const uint32_t bits = (uint32_t)half << 16; /* bfloat16 is the upper half of a float32 */
                memcpy(&out[j], &bits, sizeof bits);
            } else {
                memcpy(&out[j], p + j * stride, sizeof(float));
            }
        } else {
            out[j] = 0.0f;
        }
    }
}

/* ---- the portable loop -------------------------------------------------------------------------------------- */

#define PORTABLE_SUM(name, x, y, how) a->name[j] += x * y;
#define PORTABLE_BELOW(name, threshold) a->name[j] += rel < (float)(threshold);

/* Folds LANES element pairs into the lanes. With `masked`, NaN/inf at the same positions on both sides become 0 on
 * both sides, and a mismatch flag is set where the positions differ. */
INLINE void step_portable(Lanes *a, float *nf, float *bf, int masked, float tx) {
    for (int j = 0; j < LANES; j++) {
        if (masked && (!isfinite(nf[j]) || !isfinite(bf[j]))) {
            a->mismatch[j] |= (!isnan(nf[j]) != !isnan(bf[j])) | (!isinf(nf[j]) != !isinf(bf[j]));
            nf[j] = 0.0f;
            bf[j] = 0.0f;
        }
        const double n = nf[j], b = bf[j], d = n - b, ad = fabs(d);
        SUM_LIST(PORTABLE_SUM)
        a->max_abs[j] = ad > a->max_abs[j] ? ad : a->max_abs[j];
        const float e = bf[j] == 0.0f ? EPS32 : 0.0f; /* eps on both sides where the bench is 0 */
        const float den = bf[j] + e, rel = fabsf(((nf[j] + e) - den) / den);
        a->max_rel[j] = rel > a->max_rel[j] ? rel : a->max_rel[j];
        BELOW_LIST(PORTABLE_BELOW)
        a->beyond[j] += rel > tx;
    }
}

INLINE void block_portable(Lanes *a, const char *np, Py_ssize_t ns, SideKind nk, const char *bp, Py_ssize_t bs,
                           SideKind bk, Py_ssize_t len, int masked, float tx) {
    float nf[LANES], bf[LANES];
    for (Py_ssize_t i = 0; i < len; i += LANES) {
        const int count = len - i < LANES ? (int)(len - i) : LANES;
        load_floats(nf, np + i * ns, ns, nk, count, LANES);
        load_floats(bf, bp + i * bs, bs, bk, count, LANES);
        step_portable(a, nf, bf, masked, tx);
        a->padding += LANES - count;
    }
}

/* ---- the SSE2 loop: 4 elements per step; float64 lanes (0, 1) and (2, 3) in two registers ------------------ */

#if HAVE_SSE2
#define SSE2_FIELD_SUM(name, ...) __m128d name[2];
#define SSE2_FIELD_COUNT(name, ...) __m128i name;
typedef struct {
    SUM_LIST(SSE2_FIELD_SUM)
    __m128d max_abs[2];
    __m128 max_rel;
    BELOW_LIST(SSE2_FIELD_COUNT)
    __m128i beyond, mismatch;
} Sse2;
#define SSE2_SUM(name, x, y, how)                                                                            \
    v->name[0] = _mm_add_pd(v->name[0], _mm_mul_pd(x##0, y##0));                                              \
    v->name[1] = _mm_add_pd(v->name[1], _mm_mul_pd(x##1, y##1));
#define SSE2_BELOW(name, threshold) /* true = -1 */                                                          \
    v->name = _mm_sub_epi32(v->name, _mm_castps_si128(_mm_cmplt_ps(rel, _mm_set1_ps((float)(threshold)))));
#define SSE2_ZERO_SUM(name, ...) v.name[k] = _mm_setzero_pd();
#define SSE2_ZERO_COUNT(name, ...) v.name = _mm_setzero_si128();
#define SSE2_STORE_SUM(name, ...) _mm_storeu_pd(a->name + 2 * k, v.name[k]);
#define SSE2_STORE_COUNT(name, ...) _mm_storeu_si128((__m128i *)a->name, v.name);

INLINE __m128 sse2_load(const char *p, Py_ssize_t stride, SideKind kind) {
    if (kind == SIDE_BF16 && stride == 2) /* 4 x uint16 (movq, no alignment needed) into the upper halves */
        return _mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), _mm_loadl_epi64((const __m128i *)p)));
    if (kind == SIDE_F32 && stride == 4)
        return _mm_loadu_ps((const float *)p);
    float v[4];
    load_floats(v, p, stride, kind, 4, 4);
    return _mm_loadu_ps(v);
}

INLINE void sse2_step(Sse2 *v, __m128 nf, __m128 bf, int masked, __m128 tx) {
    const __m128 abs32 = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
    const __m128d abs64 = _mm_castsi128_pd(_mm_set1_epi64x(0x7fffffffffffffffLL));
    if (masked) {
        const __m128 inf = _mm_set1_ps(INFINITY);
        const __m128 n_nan = _mm_cmpunord_ps(nf, nf), b_nan = _mm_cmpunord_ps(bf, bf);
        const __m128 n_inf = _mm_cmpeq_ps(_mm_and_ps(nf, abs32), inf);
        const __m128 b_inf = _mm_cmpeq_ps(_mm_and_ps(bf, abs32), inf);
        const __m128 differ = _mm_or_ps(_mm_xor_ps(n_nan, b_nan), _mm_xor_ps(n_inf, b_inf));
        v->mismatch = _mm_or_si128(v->mismatch, _mm_castps_si128(differ));
        const __m128 bad = _mm_or_ps(_mm_or_ps(n_nan, n_inf), _mm_or_ps(b_nan, b_inf));
        nf = _mm_andnot_ps(bad, nf);
        bf = _mm_andnot_ps(bad, bf);
    }
    const __m128d n0 = _mm_cvtps_pd(nf), n1 = _mm_cvtps_pd(_mm_movehl_ps(nf, nf));
    const __m128d b0 = _mm_cvtps_pd(bf), b1 = _mm_cvtps_pd(_mm_movehl_ps(bf, bf));
    const __m128d d0 = _mm_sub_pd(n0, b0), d1 = _mm_sub_pd(n1, b1);
    SUM_LIST(SSE2_SUM)
    v->max_abs[0] = _mm_max_pd(_mm_and_pd(d0, abs64), v->max_abs[0]); /* x > m ? x : m */
    v->max_abs[1] = _mm_max_pd(_mm_and_pd(d1, abs64), v->max_abs[1]);
    const __m128 e = _mm_and_ps(_mm_cmpeq_ps(bf, _mm_setzero_ps()), _mm_set1_ps(EPS32));
    const __m128 den = _mm_add_ps(bf, e);
    const __m128 rel = _mm_and_ps(_mm_div_ps(_mm_sub_ps(_mm_add_ps(nf, e), den), den), abs32);
    v->max_rel = _mm_max_ps(rel, v->max_rel);
    BELOW_LIST(SSE2_BELOW)
    v->beyond = _mm_sub_epi32(v->beyond, _mm_castps_si128(_mm_cmpgt_ps(rel, tx)));
}

INLINE void block_sse2(Lanes *a, const char *np, Py_ssize_t ns, SideKind nk, const char *bp, Py_ssize_t bs,
                       SideKind bk, Py_ssize_t len, int masked, float tolerance) {
    Sse2 v;
    const __m128 tx = _mm_set1_ps(tolerance);
    for (int k = 0; k < 2; k++) {
        SUM_LIST(SSE2_ZERO_SUM)
        v.max_abs[k] = _mm_setzero_pd();
    }
    v.max_rel = _mm_setzero_ps();
    BELOW_LIST(SSE2_ZERO_COUNT)
    v.beyond = v.mismatch = _mm_setzero_si128();
    Py_ssize_t i = 0;
    for (; i + 4 <= len; i += 4)
        sse2_step(&v, sse2_load(np + i * ns, ns, nk), sse2_load(bp + i * bs, bs, bk), masked, tx);
    if (i < len) { /* the tail, padded with zeros */
        float nf[4], bf[4];
        load_floats(nf, np + i * ns, ns, nk, (int)(len - i), 4);
        load_floats(bf, bp + i * bs, bs, bk, (int)(len - i), 4);
        sse2_step(&v, _mm_loadu_ps(nf), _mm_loadu_ps(bf), masked, tx);
        a->padding = (int32_t)(4 - (len - i));
    }
    for (int k = 0; k < 2; k++) {
        SUM_LIST(SSE2_STORE_SUM)
        _mm_storeu_pd(a->max_abs + 2 * k, v.max_abs[k]);
    }
    _mm_storeu_ps(a->max_rel, v.max_rel);
    BELOW_LIST(SSE2_STORE_COUNT)
    _mm_storeu_si128((__m128i *)a->beyond, v.beyond);
    _mm_storeu_si128((__m128i *)a->mismatch, v.mismatch);
}
#endif

/* ---- the AVX2 loop: 8 elements per step; the float64 lanes 0..3 in one register get elements i..i+3, then
 * i+4..i+7 (the order of two steps of the other loops) ----------------------------------------------------- */

#if HAVE_AVX2
#define AVX2_INLINE static inline __attribute__((always_inline, target("avx2")))

#define AVX2_FIELD_SUM(name, ...) __m256d name;
#define AVX2_FIELD_COUNT(name, ...) __m256i name;
typedef struct {
    SUM_LIST(AVX2_FIELD_SUM)
    __m256d max_abs;
    __m256 max_rel;
    BELOW_LIST(AVX2_FIELD_COUNT)
    __m256i beyond, mismatch;
} Avx2;
#define AVX2_SUM(name, x, y, how) v->name = _mm256_add_pd(v->name, _mm256_mul_pd(x, y));
#define AVX2_BELOW(name, threshold)                                                                          \
    v->name = _mm256_sub_epi32(v->name,                                                                       \
                               _mm256_castps_si256(_mm256_cmp_ps(rel, _mm256_set1_ps((float)(threshold)), _CMP_LT_OQ)));
#define AVX2_ZERO_SUM(name, ...) v.name = _mm256_setzero_pd();
#define AVX2_ZERO_COUNT(name, ...) v.name = _mm256_setzero_si256();
#define AVX2_STORE_SUM(name, ...) _mm256_storeu_pd(a->name, v.name);
#define AVX2_STORE_COUNT(name, ...) _mm256_storeu_si256((__m256i *)a->name, v.name);

AVX2_INLINE __m256 avx2_load(const char *p, Py_ssize_t stride, SideKind kind) {
    if (kind == SIDE_BF16 && stride == 2) {
        const __m256i words = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
        return _mm256_castsi256_ps(_mm256_slli_epi32(words, 16));
    }
    if (kind == SIDE_F32 && stride == 4)
        return _mm256_loadu_ps((const float *)p);
    float v[8];
    load_floats(v, p, stride, kind, 8, 8);
    return _mm256_loadu_ps(v);
}

AVX2_INLINE void avx2_sums(Avx2 *v, __m256d n, __m256d b) {
    const __m256d d = _mm256_sub_pd(n, b);
    SUM_LIST(AVX2_SUM)
    const __m256d abs64 = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffLL));
    v->max_abs = _mm256_max_pd(_mm256_and_pd(d, abs64), v->max_abs);
}

AVX2_INLINE void avx2_step(Avx2 *v, __m256 nf, __m256 bf, int masked, __m256 tx) {
    const __m256 abs32 = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    if (masked) {
        const __m256 inf = _mm256_set1_ps(INFINITY);
        const __m256 n_nan = _mm256_cmp_ps(nf, nf, _CMP_UNORD_Q), b_nan = _mm256_cmp_ps(bf, bf, _CMP_UNORD_Q);
        const __m256 n_inf = _mm256_cmp_ps(_mm256_and_ps(nf, abs32), inf, _CMP_EQ_OQ);
        const __m256 b_inf = _mm256_cmp_ps(_mm256_and_ps(bf, abs32), inf, _CMP_EQ_OQ);
        const __m256 differ = _mm256_or_ps(_mm256_xor_ps(n_nan, b_nan), _mm256_xor_ps(n_inf, b_inf));
        v->mismatch = _mm256_or_si256(v->mismatch, _mm256_castps_si256(differ));
        const __m256 bad = _mm256_or_ps(_mm256_or_ps(n_nan, n_inf), _mm256_or_ps(b_nan, b_inf));
        nf = _mm256_andnot_ps(bad, nf);
        bf = _mm256_andnot_ps(bad, bf);
    }
    avx2_sums(v, _mm256_cvtps_pd(_mm256_castps256_ps128(nf)), _mm256_cvtps_pd(_mm256_castps256_ps128(bf)));
    avx2_sums(v, _mm256_cvtps_pd(_mm256_extractf128_ps(nf, 1)), _mm256_cvtps_pd(_mm256_extractf128_ps(bf, 1)));
    const __m256 e = _mm256_and_ps(_mm256_cmp_ps(bf, _mm256_setzero_ps(), _CMP_EQ_OQ), _mm256_set1_ps(EPS32));
    const __m256 den = _mm256_add_ps(bf, e);
    const __m256 rel = _mm256_and_ps(_mm256_div_ps(_mm256_sub_ps(_mm256_add_ps(nf, e), den), den), abs32);
    v->max_rel = _mm256_max_ps(rel, v->max_rel);
    BELOW_LIST(AVX2_BELOW)
    v->beyond = _mm256_sub_epi32(v->beyond, _mm256_castps_si256(_mm256_cmp_ps(rel, tx, _CMP_GT_OQ)));
}

AVX2_INLINE void block_avx2(Lanes *a, const char *np, Py_ssize_t ns, SideKind nk, const char *bp, Py_ssize_t bs,
                            SideKind bk, Py_ssize_t len, int masked, float tolerance) {
    Avx2 v;
    const __m256 tx = _mm256_set1_ps(tolerance);
    SUM_LIST(AVX2_ZERO_SUM)
    v.max_abs = _mm256_setzero_pd();
    v.max_rel = _mm256_setzero_ps();
    BELOW_LIST(AVX2_ZERO_COUNT)
    v.beyond = v.mismatch = _mm256_setzero_si256();
    Py_ssize_t i = 0;
    for (; i + 8 <= len; i += 8)
        avx2_step(&v, avx2_load(np + i * ns, ns, nk), avx2_load(bp + i * bs, bs, bk), masked, tx);
    if (i < len) { /* the tail, padded with zeros */
        float nf[8], bf[8];
        load_floats(nf, np + i * ns, ns, nk, (int)(len - i), 8);
        load_floats(bf, bp + i * bs, bs, bk, (int)(len - i), 8);
        avx2_step(&v, _mm256_loadu_ps(nf), _mm256_loadu_ps(bf), masked, tx);
        a->padding = (int32_t)(8 - (len - i));
    }
    SUM_LIST(AVX2_STORE_SUM)
    _mm256_storeu_pd(a->max_abs, v.max_abs);
    _mm256_storeu_ps(a->max_rel, v.max_rel);
    BELOW_LIST(AVX2_STORE_COUNT)
    _mm256_storeu_si256((__m256i *)a->beyond, v.beyond);
    _mm256_storeu_si256((__m256i *)a->mismatch, v.mismatch);
}
#endif

/* ---- the AVX-512 loop: 16 elements per step; the float32 work in one 16-wide register, the float64 products
 * 8 wide, added into the same 4 float64 lanes as the other loops: elements i..i+3, then i+4..i+7, and so on
 * (the order of four steps of the SSE2 loop) ----------------------------------------------------------------- */

#if HAVE_AVX512
#define AVX512_INLINE static inline __attribute__((always_inline, target("avx512f,avx512vl")))

#define AVX512_FIELD_SUM(name, ...) __m256d name; /* the 4 lanes of each sum */
#define AVX512_FIELD_COUNT(name, ...) __m512i name;
typedef struct {
    SUM_LIST(AVX512_FIELD_SUM)
    __m512d max_abs;
    __m512 max_rel;
    BELOW_LIST(AVX512_FIELD_COUNT)
    __m512i beyond;
    __mmask16 mismatch;
} Avx512;
#define AVX512_SUM(name, x, y, how) v->name = avx512_add8(v->name, _mm512_mul_pd(x, y));
#define AVX512_BELOW(name, threshold)                                                                        \
    v->name = _mm512_mask_add_epi32(v->name, _mm512_cmp_ps_mask(rel, _mm512_set1_ps((float)(threshold)), _CMP_LT_OQ), \
                                    v->name, one);
#define AVX512_ZERO_SUM(name, ...) v->name = _mm256_setzero_pd();
#define AVX512_ZERO_COUNT(name, ...) v->name = _mm512_setzero_si512();
#define AVX512_STORE_SUM(name, ...) _mm256_storeu_pd(a->name, v->name);
#define AVX512_STORE_COUNT(name, ...) _mm512_storeu_si512((void *)a->name, v->name);

AVX512_INLINE __m512 avx512_load(const char *p, Py_ssize_t stride, SideKind kind) {
    if (kind == SIDE_BF16 && stride == 2) {
        const __m512i words = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
        return _mm512_castsi512_ps(_mm512_slli_epi32(words, 16));
    }
    if (kind == SIDE_F32 && stride == 4)
        return _mm512_loadu_ps((const float *)p);
    float v[16];
    load_floats(v, p, stride, kind, 16, 16);
    return _mm512_loadu_ps(v);
}

/* Adds the 8 products in p to the lanes: first its elements 0..3, then 4..7. */
AVX512_INLINE __m256d avx512_add8(__m256d lanes, __m512d p) {
    lanes = _mm256_add_pd(lanes, _mm512_castpd512_pd256(p));
    return _mm256_add_pd(lanes, _mm512_extractf64x4_pd(p, 1));
}

AVX512_INLINE void avx512_sums(Avx512 *v, __m256 n8, __m256 b8) {
    const __m512d n = _mm512_cvtps_pd(n8), b = _mm512_cvtps_pd(b8), d = _mm512_sub_pd(n, b);
    SUM_LIST(AVX512_SUM)
    v->max_abs = _mm512_max_pd(_mm512_abs_pd(d), v->max_abs);
}

AVX512_INLINE __m256 avx512_high8(__m512 x) {
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1));
}

AVX512_INLINE void avx512_rel(Avx512 *v, __m512 nf, __m512 bf, __m512 tx);

AVX512_INLINE void avx512_step(Avx512 *v, __m512 nf, __m512 bf, int masked, __m512 tx) {
    if (masked) {
        const __m512 inf = _mm512_set1_ps(INFINITY);
        const __mmask16 n_nan = _mm512_cmp_ps_mask(nf, nf, _CMP_UNORD_Q), b_nan = _mm512_cmp_ps_mask(bf, bf, _CMP_UNORD_Q);
        const __mmask16 n_inf = _mm512_cmp_ps_mask(_mm512_abs_ps(nf), inf, _CMP_EQ_OQ);
        const __mmask16 b_inf = _mm512_cmp_ps_mask(_mm512_abs_ps(bf), inf, _CMP_EQ_OQ);
        v->mismatch |= (__mmask16)((n_nan ^ b_nan) | (n_inf ^ b_inf));
        const __mmask16 good = (__mmask16)~(n_nan | n_inf | b_nan | b_inf);
        nf = _mm512_maskz_mov_ps(good, nf);
        bf = _mm512_maskz_mov_ps(good, bf);
    }
    avx512_sums(v, _mm512_castps512_ps256(nf), _mm512_castps512_ps256(bf));
    avx512_sums(v, avx512_high8(nf), avx512_high8(bf));
    avx512_rel(v, nf, bf, tx);
}

/* The float32 relative error of 16 element pairs: its maximum and the counts. */
AVX512_INLINE void avx512_rel(Avx512 *v, __m512 nf, __m512 bf, __m512 tx) {
    const __mmask16 zero = _mm512_cmp_ps_mask(bf, _mm512_setzero_ps(), _CMP_EQ_OQ);
    const __m512 e = _mm512_maskz_mov_ps(zero, _mm512_set1_ps(EPS32));
    const __m512 den = _mm512_add_ps(bf, e);
    const __m512 rel = _mm512_abs_ps(_mm512_div_ps(_mm512_sub_ps(_mm512_add_ps(nf, e), den), den));
    const __m512i one = _mm512_set1_epi32(1);
    v->max_rel = _mm512_max_ps(rel, v->max_rel);
    BELOW_LIST(AVX512_BELOW)
    v->beyond = _mm512_mask_add_epi32(v->beyond, _mm512_cmp_ps_mask(rel, tx, _CMP_GT_OQ), v->beyond, one);
}

AVX512_INLINE void avx512_init(Avx512 *v) {
    SUM_LIST(AVX512_ZERO_SUM)
    v->max_abs = _mm512_setzero_pd();
    v->max_rel = _mm512_setzero_ps();
    BELOW_LIST(AVX512_ZERO_COUNT)
    v->beyond = _mm512_setzero_si512();
    v->mismatch = 0;
}

AVX512_INLINE void avx512_store(Lanes *a, const Avx512 *v) {
    SUM_LIST(AVX512_STORE_SUM)
    _mm512_storeu_pd(a->max_abs, v->max_abs);
    _mm512_storeu_ps(a->max_rel, v->max_rel);
    BELOW_LIST(AVX512_STORE_COUNT)
    _mm512_storeu_si512((void *)a->beyond, v->beyond);
    a->mismatch[0] = v->mismatch != 0;
}

AVX512_INLINE void block_avx512(Lanes *a, const char *np, Py_ssize_t ns, SideKind nk, const char *bp, Py_ssize_t bs,
                                SideKind bk, Py_ssize_t len, int masked, float tolerance) {
    Avx512 v;
    const __m512 tx = _mm512_set1_ps(tolerance);
    avx512_init(&v);
    Py_ssize_t i = 0;
    for (; i + 16 <= len; i += 16)
        avx512_step(&v, avx512_load(np + i * ns, ns, nk), avx512_load(bp + i * bs, bs, bk), masked, tx);
    if (i < len) { /* the tail, padded with zeros */
        float nf[16], bf[16];
        load_floats(nf, np + i * ns, ns, nk, (int)(len - i), 16);
        load_floats(bf, bp + i * bs, bs, bk, (int)(len - i), 16);
        avx512_step(&v, _mm512_loadu_ps(nf), _mm512_loadu_ps(bf), masked, tx);
        a->padding = (int32_t)(16 - (len - i));
    }
    avx512_store(a, &v);
}

/* The float64 sums of two blocks at once: lanes 0..3 of each register are the first block's 4 lanes, lanes 4..7
 * the second block's, so one 8-wide addition advances both blocks by 4 elements each (in each block's own order). */
#define PAIR_FIELD_SUM(name, ...) __m512d name;
typedef struct {
    SUM_LIST(PAIR_FIELD_SUM)
    __m512d max_abs;
} Pair64;
#define PAIR_FUSED(acc, x, y) _mm512_fmadd_pd(x, y, acc) /* exact products: the same sums as multiply, then add */
#define PAIR_ROUNDED(acc, x, y) _mm512_add_pd(acc, _mm512_mul_pd(x, y))
#define PAIR_SUM(name, x, y, how)                                                                            \
    p->name = PAIR_##how(p->name, x##_lo, y##_lo);                                                            \
    p->name = PAIR_##how(p->name, x##_hi, y##_hi);
#define PAIR_ZERO_SUM(name, ...) p.name = _mm512_setzero_pd();
#define PAIR_STORE_SUM(name, ...) split_store(two[0].name, two[1].name, p.name);

/* Element pairs i..i+7 of both blocks (n0, b0: the first block's; n1, b1: the second's). */
AVX512_INLINE void pair_sums(Pair64 *p, __m256 n0, __m256 b0, __m256 n1, __m256 b1) {
    const __m512d n_a = _mm512_cvtps_pd(n0), b_a = _mm512_cvtps_pd(b0);
    const __m512d n_b = _mm512_cvtps_pd(n1), b_b = _mm512_cvtps_pd(b1);
    /* elements i..i+3 of both blocks, then i+4..i+7 of both */
    const __m512d n_lo = _mm512_shuffle_f64x2(n_a, n_b, 0x44), n_hi = _mm512_shuffle_f64x2(n_a, n_b, 0xEE);
    const __m512d b_lo = _mm512_shuffle_f64x2(b_a, b_b, 0x44), b_hi = _mm512_shuffle_f64x2(b_a, b_b, 0xEE);
    const __m512d d_lo = _mm512_sub_pd(n_lo, b_lo), d_hi = _mm512_sub_pd(n_hi, b_hi);
    SUM_LIST(PAIR_SUM)
    p->max_abs = _mm512_max_pd(_mm512_abs_pd(d_lo), p->max_abs);
    p->max_abs = _mm512_max_pd(_mm512_abs_pd(d_hi), p->max_abs);
}

/* Lanes 0..3 of x into first[0..3], lanes 4..7 into second[0..3]. */
AVX512_INLINE void split_store(double *first, double *second, __m512d x) {
    _mm256_storeu_pd(first, _mm512_castpd512_pd256(x));
    _mm256_storeu_pd(second, _mm512_extractf64x4_pd(x, 1));
}

/* Two whole blocks at once, unmasked: the block at np, bp into two[0], the next one into two[1]. */
AVX512_INLINE void pair_avx512(Lanes *two, const char *np, Py_ssize_t ns, SideKind nk, const char *bp, Py_ssize_t bs,
                               SideKind bk, float tolerance) {
    Avx512 v[2]; /* the float32 part of each block */
    Pair64 p;
    const __m512 tx = _mm512_set1_ps(tolerance);
    avx512_init(&v[0]);
    avx512_init(&v[1]);
    SUM_LIST(PAIR_ZERO_SUM)
    p.max_abs = _mm512_setzero_pd();
    const char *np1 = np + BLOCK * ns, *bp1 = bp + BLOCK * bs;
    for (Py_ssize_t i = 0; i < BLOCK; i += 16) {
        const __m512 n0 = avx512_load(np + i * ns, ns, nk), b0 = avx512_load(bp + i * bs, bs, bk);
        const __m512 n1 = avx512_load(np1 + i * ns, ns, nk), b1 = avx512_load(bp1 + i * bs, bs, bk);
        pair_sums(&p, _mm512_castps512_ps256(n0), _mm512_castps512_ps256(b0), _mm512_castps512_ps256(n1),
                  _mm512_castps512_ps256(b1));
        pair_sums(&p, avx512_high8(n0), avx512_high8(b0), avx512_high8(n1), avx512_high8(b1));
        avx512_rel(&v[0], n0, b0, tx);
        avx512_rel(&v[1], n1, b1, tx);
    }
    avx512_store(&two[0], &v[0]);
    avx512_store(&two[1], &v[1]);
    SUM_LIST(PAIR_STORE_SUM)
    double max_abs[8];
    _mm512_storeu_pd(max_abs, p.max_abs);
    for (int j = 0; j < 4; j++) {
        two[0].max_abs[j] = max_abs[j];
        two[1].max_abs[j] = max_abs[4 + j];
        two[0].max_abs[4 + j] = two[1].max_abs[4 + j] = 0.0;
    }
}
#endif

/* ---- blocks and chunks -------------------------------------------------------------------------------------- */

INLINE double sum_lanes(const double *x) {
    return (x[0] + x[1]) + (x[2] + x[3]);
}

enum { BLOCK_OK = 0, BLOCK_NONFINITE = 1, BLOCK_MISMATCH = 2 };

#define FOLD_LANE_COUNT(name, ...) below[k++] += a->name[j];
#define FOLD_SUM(name, ...) t->name += sum_lanes(a->name);
#define FOLD_COUNT(name, ...) t->name += below[k++];

/* Folds a finished block into *t: BLOCK_NONFINITE (leaving *t alone) when an unmasked block holds a NaN or an inf,
 * BLOCK_MISMATCH when a masked one found their positions different. */
static int fold_block(const Lanes *a, int masked, Totals *t) {
    const double nn = sum_lanes(a->nn), bb = sum_lanes(a->bb);
    if (!masked && !(isfinite(nn) && isfinite(bb)))
        return BLOCK_NONFINITE;
    int32_t mismatch = 0, beyond = 0, below[N_BELOW];
    for (int k = 0; k < N_BELOW; k++)
        below[k] = -a->padding;
    double max_abs = t->max_abs;
    float max_rel = t->max_rel;
    for (int j = 0; j < MAX_WIDTH; j++) {
        int k = 0;
        mismatch |= a->mismatch[j];
        BELOW_LIST(FOLD_LANE_COUNT)
        beyond += a->beyond[j];
        max_abs = a->max_abs[j] > max_abs ? a->max_abs[j] : max_abs;
        max_rel = a->max_rel[j] > max_rel ? a->max_rel[j] : max_rel;
    }
    if (mismatch)
        return BLOCK_MISMATCH;
    SUM_LIST(FOLD_SUM) /* nn and bb again: the same additions, the same values */
    t->max_abs = max_abs;
    t->max_rel = max_rel;
    int k = 0;
    BELOW_LIST(FOLD_COUNT)
    (void)k;
    t->beyond += beyond;
    return BLOCK_OK;
}

/* All blocks of a chunk, through `block` (one of the block_* loops): 0, or -1 when the NaN/inf positions differ.
 * With `pair` (a pair_* loop, or NO_PAIR), two whole blocks at a time go through it first, unmasked: their lanes
 * are independent accumulators, so the two blocks' float64 additions overlap instead of waiting on each other's
 * latency; each block is then folded (and, when needed, redone masked) in order, exactly as one at a time. */
#define NO_PAIR(...) ((void)0)
#define ONE_BLOCK(block, start_, size_, first_masked)                                                        \
    do {                                                                                                      \
        const char *nb = np + (start_) * ns, *bb = bp + (start_) * bs;                                        \
        for (int masked = (first_masked); masked < 2; masked++) {                                             \
            Lanes a;                                                                                          \
            memset(&a, 0, sizeof a);                                                                          \
            if (masked)                                                                                       \
                block(&a, nb, ns, nk, bb, bs, bk, (size_), 1, tx);                                            \
            else                                                                                              \
                block(&a, nb, ns, nk, bb, bs, bk, (size_), 0, tx);                                            \
            const int status = fold_block(&a, masked, t);                                                     \
            if (status == BLOCK_MISMATCH)                                                                     \
                return -1;                                                                                    \
            if (status == BLOCK_OK)                                                                           \
                break;                                                                                        \
        }                                                                                                     \
    } while (0)
#define RUN_BODY(block, pair, paired)                                                                         \
    Py_ssize_t start = 0;                                                                                     \
    for (; (paired) && start + 2 * BLOCK <= len; start += 2 * BLOCK) {                                       \
        Lanes two[2];                                                                                         \
        memset(two, 0, sizeof two);                                                                           \
        pair(two, np + start * ns, ns, nk, bp + start * bs, bs, bk, tx);                                      \
        for (int k = 0; k < 2; k++) {                                                                         \
            const int status = fold_block(&two[k], 0, t);                                                     \
            if (status == BLOCK_MISMATCH)                                                                     \
                return -1;                                                                                    \
            if (status == BLOCK_NONFINITE)                                                                    \
                ONE_BLOCK(block, start + k * BLOCK, BLOCK, 1);                                                \
        }                                                                                                     \
    }                                                                                                         \
    for (; start < len; start += BLOCK)                                                                       \
        ONE_BLOCK(block, start, len - start < BLOCK ? len - start : BLOCK, 0);                                \
    return 0;

typedef int (*RunFn)(const char *, Py_ssize_t, const char *, Py_ssize_t, Py_ssize_t, float, Totals *);

/* One function per loop and pair of side kinds, with unit strides known at compile time or general strides. */
#define DEFINE_RUN(attrs, name, block, pair, paired, nk_, bk_)                                                            \
    static attrs int name##_unit(const char *np, Py_ssize_t ns_, const char *bp, Py_ssize_t bs_,              \
                                 Py_ssize_t len, float tx, Totals *t) {                                       \
        const SideKind nk = nk_, bk = bk_;                                                                    \
        const Py_ssize_t ns = SIZE_OF(nk_), bs = SIZE_OF(bk_);                                                \
        (void)ns_;                                                                                            \
        (void)bs_;                                                                                            \
        RUN_BODY(block, pair, paired)                                                                         \
    }                                                                                                         \
    static attrs int name##_strided(const char *np, Py_ssize_t ns, const char *bp, Py_ssize_t bs,             \
                                    Py_ssize_t len, float tx, Totals *t) {                                    \
        const SideKind nk = nk_, bk = bk_;                                                                    \
        RUN_BODY(block, pair, paired)                                                                         \
    }
#define DEFINE_RUNS(attrs, loop, block, pair, paired)                                                         \
    DEFINE_RUN(attrs, loop##_f32_f32, block, pair, paired, SIDE_F32, SIDE_F32)                                \
    DEFINE_RUN(attrs, loop##_f32_bf16, block, pair, paired, SIDE_F32, SIDE_BF16)                              \
    DEFINE_RUN(attrs, loop##_bf16_f32, block, pair, paired, SIDE_BF16, SIDE_F32)                              \
    DEFINE_RUN(attrs, loop##_bf16_bf16, block, pair, paired, SIDE_BF16, SIDE_BF16)                            \
    static const RunFn loop##_runs[2][2][2] = { /* [npu kind][bench kind][strided] */                        \
        {{loop##_f32_f32_unit, loop##_f32_f32_strided}, {loop##_f32_bf16_unit, loop##_f32_bf16_strided}},     \
        {{loop##_bf16_f32_unit, loop##_bf16_f32_strided}, {loop##_bf16_bf16_unit, loop##_bf16_bf16_strided}}, \
    };

#define NO_ATTRS
DEFINE_RUNS(NO_ATTRS, portable, block_portable, NO_PAIR, 0)
#if HAVE_SSE2
DEFINE_RUNS(NO_ATTRS, sse2, block_sse2, NO_PAIR, 0)
#endif
#if HAVE_AVX2
DEFINE_RUNS(TARGET_AVX2, avx2, block_avx2, NO_PAIR, 0)
#endif
#if HAVE_AVX512
DEFINE_RUNS(TARGET_AVX512, avx512, block_avx512, pair_avx512, 1)
#endif

/* Whether this machine can run a loop. */
static int loop_available(LoopKind loop) {
    switch (loop) {
    case LOOP_PORTABLE:
        return 1;
    case LOOP_SSE2:
        return HAVE_SSE2;
    case LOOP_AVX2:
#if HAVE_AVX2
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") != 0;
#else
        return 0;
#endif
    case LOOP_AVX512:
#if HAVE_AVX512
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f") != 0 && __builtin_cpu_supports("avx512vl") != 0;
#else
        return 0;
#endif
    default:
        return 0;
    }
}

static RunFn pick(LoopKind loop, int n_bf16, int b_bf16, int strided) {
    switch (loop) {
#if HAVE_AVX512
    case LOOP_AVX512:
        return avx512_runs[n_bf16][b_bf16][strided];
#endif
#if HAVE_AVX2
    case LOOP_AVX2:
        return avx2_runs[n_bf16][b_bf16][strided];
#endif
#if HAVE_SSE2
    case LOOP_SSE2:
        return sse2_runs[n_bf16][b_bf16][strided];
#endif
    default:
        return portable_runs[n_bf16][b_bf16][strided];
    }
}

/* ---- Python interface --------------------------------------------------------------------------------------- */

static LoopKind best_loop = LOOP_PORTABLE; /* set at import */

/* Adds a chunk's totals to the running ones, as tensor_compare.py adds the chunks' results (in chunk order). */
#define CHUNK_ADD(name, ...) t->name += c->name;
static void fold_chunk(Totals *t, const Totals *c) {
    SUM_LIST(CHUNK_ADD)
    t->max_abs = c->max_abs > t->max_abs ? c->max_abs : t->max_abs;
    t->max_rel = c->max_rel > t->max_rel ? c->max_rel : t->max_rel;
    BELOW_LIST(CHUNK_ADD)
    t->beyond += c->beyond;
}

/* A `sums` argument: None leaves the sums of *t as they are; else a tuple of N_SUMS floats, the running sums. */
#define PARSE_SUM(name, ...)                                                                                 \
    t->name = PyFloat_AsDouble(PyTuple_GET_ITEM(arg, k++));                                                   \
    if (t->name == -1.0 && PyErr_Occurred())                                                                  \
        return -1;
static int parse_sums(PyObject *arg, Totals *t) {
    if (arg == Py_None)
        return 0;
    if (!PyTuple_Check(arg) || PyTuple_GET_SIZE(arg) != N_SUMS) {
        PyErr_Format(PyExc_TypeError, "sums must be a tuple of %d floats", N_SUMS);
        return -1;
    }
    Py_ssize_t k = 0;
    SUM_LIST(PARSE_SUM)
    return 0;
}

/* The result tuple: the sums, max_abs, max_rel, the counts below, beyond. */
#define RESULT_FORMAT_SUM(...) "d"
#define RESULT_FORMAT_COUNT(...) "L"
#define RESULT_SUM(name, ...) t->name,
#define RESULT_COUNT(name, ...) (long long)t->name,
static PyObject *result_of(const Totals *t) {
    return Py_BuildValue("(" SUM_LIST(RESULT_FORMAT_SUM) "dd" BELOW_LIST(RESULT_FORMAT_COUNT) "L)", SUM_LIST(RESULT_SUM)
                         t->max_abs, (double)t->max_rel, BELOW_LIST(RESULT_COUNT) (long long)t->beyond);
}

/* Whether a buffer format string means `code` in native byte order. */
static int format_is(const char *format, char code) {
    if (format == NULL)
        return code == 'B';
    if (format[0] == '@' || format[0] == '=')
        format++;
#if PY_LITTLE_ENDIAN
    else if (format[0] == '<')
        format++;
#else
    else if (format[0] == '>' || format[0] == '!')
        format++;
#endif
    return format[0] == code && format[1] == '\0';
}

static int get_side(PyObject *obj, int is_bf16, Py_buffer *view, const char *which) {
    if (PyObject_GetBuffer(obj, view, PyBUF_RECORDS_RO) < 0)
        return -1;
    const char code = is_bf16 ? 'H' : 'f';
    if (view->ndim != 1 || view->itemsize != SIZE_OF(is_bf16 ? SIDE_BF16 : SIDE_F32) ||
        !format_is(view->format, code)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a 1-D buffer of format '%c'", which, code);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* A `tolerance` argument: None leaves *tx as it is; else a float >= 0. -1 with an exception set otherwise. */
static int parse_tolerance(PyObject *arg, float *tx) {
    if (arg == Py_None)
        return 0;
    const double tolerance = PyFloat_AsDouble(arg);
    if (tolerance == -1.0 && PyErr_Occurred())
        return -1;
    if (!(tolerance >= 0.0)) {
        PyErr_SetString(PyExc_ValueError, "tolerance must be >= 0");
        return -1;
    }
    *tx = (float)tolerance;
    return 0;
}

static PyObject *accumulate_with(LoopKind loop, PyObject *const *args, Py_ssize_t nargs) {
    float tx = INFINITY; /* no tolerance: nothing is beyond it */
    Py_ssize_t chunk = 0; /* 0: the whole buffer is one chunk */
    Totals t = {0};
    if (nargs >= 6 && args[5] != Py_None) {
        chunk = PyLong_AsSsize_t(args[5]);
        if (chunk == -1 && PyErr_Occurred())
            return NULL;
        if (chunk < 1) {
            PyErr_SetString(PyExc_ValueError, "chunk must be positive");
            return NULL;
        }
    }
    if (nargs == 7 && parse_sums(args[6], &t) < 0)
        return NULL;
    if (nargs >= 5 && parse_tolerance(args[4], &tx) < 0)
        return NULL;
    const int n_bf16 = PyObject_IsTrue(args[1]), b_bf16 = PyObject_IsTrue(args[3]);
    if (n_bf16 < 0 || b_bf16 < 0)
        return NULL;
    Py_buffer nv, bv;
    if (get_side(args[0], n_bf16, &nv, "npu") < 0)
        return NULL;
    if (get_side(args[2], b_bf16, &bv, "bench") < 0) {
        PyBuffer_Release(&nv);
        return NULL;
    }
    const Py_ssize_t len = nv.shape[0];
    if (bv.shape[0] != len) {
        PyBuffer_Release(&nv);
        PyBuffer_Release(&bv);
        PyErr_SetString(PyExc_ValueError, "npu and bench buffers differ in length");
        return NULL;
    }
    const Py_ssize_t ns = nv.strides[0], bs = bv.strides[0];
    const RunFn fn = pick(loop, n_bf16, b_bf16, ns != nv.itemsize || bs != bv.itemsize);
    int status = 0;
    Py_BEGIN_ALLOW_THREADS
    if (chunk == 0 || chunk >= len) {
        Totals c = {0};
        status = fn((const char *)nv.buf, ns, (const char *)bv.buf, bs, len, tx, &c);
        fold_chunk(&t, &c);
    } else {
        for (Py_ssize_t start = 0; start < len && status == 0; start += chunk) {
            Totals c = {0};
            const Py_ssize_t size = len - start < chunk ? len - start : chunk;
            status = fn((const char *)nv.buf + start * ns, ns, (const char *)bv.buf + start * bs, bs, size, tx, &c);
            fold_chunk(&t, &c);
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&nv);
    PyBuffer_Release(&bv);
    if (status < 0)
        Py_RETURN_NONE;
    return result_of(&t);
}

static PyObject *accumulate(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs < 4 || nargs > 7) {
        PyErr_SetString(PyExc_TypeError, "accumulate(npu, npu_is_bf16, bench, bench_is_bf16[, tolerance[, chunk[, "
                                         "sums]]]) takes 4 to 7 arguments");
        return NULL;
    }
    return accumulate_with(best_loop, args, nargs);
}

static PyObject *accumulate_loop(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs < 5 || nargs > 8 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError,
                        "accumulate_loop(loop, npu, npu_is_bf16, bench, bench_is_bf16[, tolerance[, chunk[, sums]]]) "
                        "takes a loop name and 4 to 7 arguments");
        return NULL;
    }
    for (int loop = 0; loop < N_LOOPS; loop++) {
        if (PyUnicode_CompareWithASCIIString(args[0], LOOP_NAMES[loop]) == 0) {
            if (!loop_available((LoopKind)loop))
                break;
            return accumulate_with((LoopKind)loop, args + 1, nargs - 1);
        }
    }
    PyErr_Format(PyExc_ValueError, "loop %R is not available here", args[0]);
    return NULL;
}


#if HAVE_PREAD
/* Reads exactly `size` bytes at `offset` of `fd` into `buf`: 0, else an errno value (EIO at an early end). */
static int read_exactly(int fd, char *buf, Py_ssize_t size, long long offset) {
    while (size > 0) {
        const ssize_t got = pread(fd, buf, (size_t)size, (off_t)offset);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (got == 0)
            return EIO; /* the file ends before the tensor does */
        buf += got;
        size -= got;
        offset += got;
    }
    return 0;
}

/* Keeps the bytes [*advised, want) of `fd` requested from the disk, WINDOW bytes at a time (up to `end`). */
#define READ_WINDOW ((long long)8 << 20)
static void advise_ahead(int fd, long long *advised, long long want, long long end) {
#if defined(POSIX_FADV_WILLNEED)
    want = want < end ? want : end;
    while (*advised < want) {
        (void)posix_fadvise(fd, (off_t)*advised, (off_t)READ_WINDOW, POSIX_FADV_WILLNEED); /* a hint only */
        *advised += READ_WINDOW;
    }
#else
    (void)fd, (void)advised, (void)want, (void)end;
#endif
}

/* accumulate_file(npu_fd, npu_offset, npu_is_bf16, bench_fd, bench_offset, bench_is_bf16, count, tolerance, chunk,
 * sums, npu_buffer, bench_buffer[, read_ahead]): accumulate() over `count` contiguous elements of each side read from the files
 * at those byte offsets, a piece at a time into the two writable buffers (reused: no page faults, no mapping; the
 * kernel then reads them from the CPU caches). Every piece starts at a multiple of 2 * BLOCK elements of its chunk,
 * so each block is computed and folded as accumulate() computes and folds it: the results are the same bit for
 * bit. With `read_ahead` bytes (for files not in the page cache), the next that many bytes of each side are kept
 * requested (posix_fadvise WILLNEED), so that the disk reads overlap the computation. Raises OSError when a file
 * cannot be read or ends early. */
static PyObject *accumulate_file(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 12 && nargs != 13) {
        PyErr_SetString(PyExc_TypeError, "accumulate_file(npu_fd, npu_offset, npu_is_bf16, bench_fd, bench_offset, "
                                         "bench_is_bf16, count, tolerance, chunk, sums, npu_buffer, bench_buffer"
                                         "[, read_ahead]) takes 12 or 13 arguments");
        return NULL;
    }
    const long long read_ahead = nargs == 13 ? PyLong_AsLongLong(args[12]) : 0;
    const int n_fd = PyLong_AsLong(args[0]), b_fd = PyLong_AsLong(args[3]);
    const long long n_off = PyLong_AsLongLong(args[1]), b_off = PyLong_AsLongLong(args[4]);
    const Py_ssize_t count = PyLong_AsSsize_t(args[6]), chunk = PyLong_AsSsize_t(args[8]);
    if (PyErr_Occurred())
        return NULL;
    if (n_fd < 0 || b_fd < 0 || n_off < 0 || b_off < 0 || count < 0 || chunk < 1 || read_ahead < 0) {
        PyErr_SetString(PyExc_ValueError, "file descriptors, offsets, count and read_ahead must be >= 0, chunk "
                                          "positive");
        return NULL;
    }
    const int n_bf16 = PyObject_IsTrue(args[2]), b_bf16 = PyObject_IsTrue(args[5]);
    if (n_bf16 < 0 || b_bf16 < 0)
        return NULL;
    float tx = INFINITY;
    if (parse_tolerance(args[7], &tx) < 0)
        return NULL;
    Totals t = {0};
    if (parse_sums(args[9], &t) < 0)
        return NULL;
    Py_buffer nv, bv;
    if (PyObject_GetBuffer(args[10], &nv, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[11], &bv, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&nv);
        return NULL;
    }
    const Py_ssize_t n_size = SIZE_OF(n_bf16 ? SIDE_BF16 : SIDE_F32), b_size = SIZE_OF(b_bf16 ? SIDE_BF16 : SIDE_F32);
    Py_ssize_t span = nv.len / n_size < bv.len / b_size ? nv.len / n_size : bv.len / b_size;
    span -= span % (2 * BLOCK);
    if (span < 2 * BLOCK) {
        PyBuffer_Release(&nv);
        PyBuffer_Release(&bv);
        PyErr_Format(PyExc_ValueError, "the buffers must hold at least %d elements of each side", 2 * BLOCK);
        return NULL;
    }
    const RunFn fn = pick(best_loop, n_bf16, b_bf16, 0);
    int status = 0, error = 0;
    long long n_advised = n_off, b_advised = b_off;
    const long long n_end = n_off + (long long)count * n_size, b_end = b_off + (long long)count * b_size;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t start = 0; start < count && status == 0 && error == 0; start += chunk) {
        Totals c = {0};
        const Py_ssize_t size = count - start < chunk ? count - start : chunk;
        for (Py_ssize_t piece = 0; piece < size; piece += span) {
            const Py_ssize_t len = size - piece < span ? size - piece : span, at = start + piece;
            if (read_ahead > 0) {
                advise_ahead(n_fd, &n_advised, n_off + (long long)at * n_size + read_ahead, n_end);
                advise_ahead(b_fd, &b_advised, b_off + (long long)at * b_size + read_ahead, b_end);
            }
            error = read_exactly(n_fd, (char *)nv.buf, len * n_size, n_off + (long long)at * n_size);
            if (error == 0)
                error = read_exactly(b_fd, (char *)bv.buf, len * b_size, b_off + (long long)at * b_size);
            if (error != 0)
                break;
            status = fn((const char *)nv.buf, n_size, (const char *)bv.buf, b_size, len, tx, &c);
            if (status < 0)
                break;
        }
        fold_chunk(&t, &c);
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&nv);
    PyBuffer_Release(&bv);
    if (error != 0) {
        errno = error;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    if (status < 0)
        Py_RETURN_NONE;
    return result_of(&t);
}
#endif

#define ACCUMULATE_DOC                                                                                         \
    "(npu, npu_is_bf16, bench, bench_is_bf16[, tolerance[, chunk[, sums]]]) -> (dot, nn, bb, ss, max_abs, "   \
    "max_rel, count1, count5, beyond), or None when the NaN/inf positions differ"

static PyMethodDef methods[] = {
    {"accumulate", (PyCFunction)(void (*)(void))accumulate, METH_FASTCALL, "accumulate" ACCUMULATE_DOC},
    {"accumulate_loop", (PyCFunction)(void (*)(void))accumulate_loop, METH_FASTCALL,
     "accumulate_loop(loop, ...): accumulate with the named loop (one of LOOPS)"},
#if HAVE_PREAD
    {"accumulate_file", (PyCFunction)(void (*)(void))accumulate_file, METH_FASTCALL,
     "accumulate_file(npu_fd, npu_offset, npu_is_bf16, bench_fd, bench_offset, bench_is_bf16, count, tolerance, "
     "chunk, sums, npu_buffer, bench_buffer): accumulate() over the pair read from the files into the buffers"},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_tensorkernel",
                                    "Fused real-data metric kernel for float32 and bfloat16 pairs.", -1, methods,
                                    NULL, NULL, NULL, NULL};

/* SUMS (the names of SUM_LIST) and THRESHOLDS (those of BELOW_LIST), for the Python side to check against its table. */
#define NAME_OF(name, ...) #name,
#define THRESHOLD_OF(name, threshold) threshold,
static int add_accumulators(PyObject *m) {
    static const char *const sums[N_SUMS] = {SUM_LIST(NAME_OF)};
    static const double thresholds[N_BELOW] = {BELOW_LIST(THRESHOLD_OF)};
    PyObject *names = PyTuple_New(N_SUMS), *values = PyTuple_New(N_BELOW);
    int ok = names != NULL && values != NULL;
    for (Py_ssize_t k = 0; ok && k < N_SUMS; k++) {
        PyObject *name = PyUnicode_FromString(sums[k]);
        ok = name != NULL;
        if (ok)
            PyTuple_SET_ITEM(names, k, name);
    }
    for (Py_ssize_t k = 0; ok && k < N_BELOW; k++) {
        PyObject *value = PyFloat_FromDouble(thresholds[k]);
        ok = value != NULL;
        if (ok)
            PyTuple_SET_ITEM(values, k, value);
    }
    if (ok && PyModule_AddObject(m, "SUMS", names) == 0) {
        names = NULL; /* stolen */
        if (PyModule_AddObject(m, "THRESHOLDS", values) == 0)
            return 0;
    }
    Py_XDECREF(names);
    Py_XDECREF(values);
    return -1;
}

PyMODINIT_FUNC PyInit__tensorkernel(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    LoopKind available[N_LOOPS];
    Py_ssize_t count = 0;
    for (int loop = 0; loop < N_LOOPS; loop++)
        if (loop_available((LoopKind)loop))
            available[count++] = best_loop = (LoopKind)loop; /* the last one is the fastest */
    PyObject *loops = PyTuple_New(count);
    for (Py_ssize_t k = 0; loops != NULL && k < count; k++) {
        PyObject *name = PyUnicode_FromString(LOOP_NAMES[available[k]]);
        if (name == NULL)
            Py_CLEAR(loops);
        else
            PyTuple_SET_ITEM(loops, k, name);
    }
    if (loops == NULL || PyModule_AddObject(m, "LOOPS", loops) < 0) {
        Py_XDECREF(loops);
        Py_DECREF(m);
        return NULL;
    }
    if (add_accumulators(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddStringConstant(m, "SIMD", LOOP_NAMES[best_loop]) < 0 ||
        PyModule_AddIntConstant(m, "LANES", LANES) < 0 || PyModule_AddIntConstant(m, "BLOCK", BLOCK) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
