// fakecublas.c: a stand-in for libcublas.so.13 and libcublasLt.so.13 (one file serves
// both) for testing package cu without a GPU. "Device" pointers are the host
// addresses fakecuda.c hands out, so the GEMMs really run, on the host, in double
// precision, for the data types R_32F, R_64F, R_16F and R_16BF. Every argument is
// validated the way cuBLAS documents it (CUBLAS_STATUS_INVALID_VALUE otherwise), and
// cuBLASLt attribute sizes are checked, so a mis-marshalled call fails.
//
// cublasLtMatmulAlgoGetHeuristic offers three algorithms, ids 1, 2, 3, needing 0,
// 4096 and 1 MiB of workspace, filtered by the preference's maximum workspace.
//
// Environment: FAKECUBLAS_ALLOC_FAILED=1 makes the GEMMs fail with
// CUBLAS_STATUS_ALLOC_FAILED (3).
//
// Build: gcc -shared -fPIC -Wl,-soname,libcublas.so.13 -o libcublas.so.13 fakecublas.c

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int cublasStatus_t;
enum { SUCCESS = 0, NOT_INITIALIZED = 1, ALLOC_FAILED = 3, INVALID_VALUE = 7, NOT_SUPPORTED = 15 };
enum { R32F = 0, R64F = 1, R16F = 2, R16BF = 14 };

static const struct {
    int code;
    const char *name, *text;
} statuses[] = {
    {0, "CUBLAS_STATUS_SUCCESS", "success"},
    {1, "CUBLAS_STATUS_NOT_INITIALIZED", "the library was not initialized"},
    {3, "CUBLAS_STATUS_ALLOC_FAILED", "the resource allocation failed"},
    {7, "CUBLAS_STATUS_INVALID_VALUE", "an invalid numeric value was used as an argument"},
    {13, "CUBLAS_STATUS_EXECUTION_FAILED", "the GPU program failed to execute"},
    {15, "CUBLAS_STATUS_NOT_SUPPORTED", "the functionality requested is not supported"},
};

static const char *status_field(int code, int text) {
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++)
        if (statuses[i].code == code) return text ? statuses[i].text : statuses[i].name;
    return text ? "unknown error" : "CUBLAS_STATUS_UNKNOWN";
}

const char *cublasGetStatusName(cublasStatus_t s) { return status_field(s, 0); }
const char *cublasGetStatusString(cublasStatus_t s) { return status_field(s, 1); }
const char *cublasLtGetStatusName(cublasStatus_t s) { return status_field(s, 0); }
const char *cublasLtGetStatusString(cublasStatus_t s) { return status_field(s, 1); }

// ---- element access ----

static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, x;
    float f;
    if (exp == 0) {
        f = (float)mant * (1.0f / 16777216.0f); // mant · 2^-24
        return sign ? -f : f;
    }
    if (exp == 31) x = sign | 0x7f800000u | (mant << 13);
    else x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    memcpy(&f, &x, 4);
    return f;
}

static uint16_t f32_to_f16(float f) { // round to nearest even
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, e = (x >> 23) & 0xff, mant = x & 0x7fffff;
    if (e == 0xff) return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
    int32_t exp = (int32_t)e - 127 + 15;
    if (exp >= 31) return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) {
        if (exp < -10) return (uint16_t)sign;
        mant |= 0x800000;
        int shift = 14 - exp;
        uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (h & 1))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = sign | ((uint32_t)exp << 10) | (mant >> 13), rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
    return (uint16_t)h;
}

static float bf16_to_f32(uint16_t b) {
    uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static uint16_t f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

static int type_ok(int t) { return t == R32F || t == R64F || t == R16F || t == R16BF; }
static size_t type_size(int t) { return t == R64F ? 8 : t == R32F ? 4 : 2; }

static double load(const void *p, int t, size_t i) {
    switch (t) {
    case R32F: return ((const float *)p)[i];
    case R64F: return ((const double *)p)[i];
    case R16F: return f16_to_f32(((const uint16_t *)p)[i]);
    default: return bf16_to_f32(((const uint16_t *)p)[i]);
    }
}

static void store(void *p, int t, size_t i, double v) {
    switch (t) {
    case R32F: ((float *)p)[i] = (float)v; break;
    case R64F: ((double *)p)[i] = v; break;
    case R16F: ((uint16_t *)p)[i] = f32_to_f16((float)v); break;
    default: ((uint16_t *)p)[i] = f32_to_bf16((float)v); break;
    }
}

// scalar reads alpha or beta of the scale type belonging to a compute type.
static double scalar(const void *p, int scale) {
    if (scale == R64F) return *(const double *)p;
    if (scale == R16F) return f16_to_f32(*(const uint16_t *)p);
    return *(const float *)p;
}

static int scale_of(int compute) { return compute == 70 || compute == 71 ? R64F : compute == 64 || compute == 65 ? R16F : R32F; }
static int compute_ok(int c) { return c == 64 || c == 65 || c == 68 || c == 69 || c == 70 || c == 71 || c == 74 || c == 75 || c == 77; }

// matrix is a column-major (or row-major) matrix view.
struct matrix {
    const void *p;
    int type, row_major;
    int64_t ld;
};

static double at(struct matrix m, int64_t i, int64_t j) {
    return load(m.p, m.type, (size_t)(m.row_major ? i * m.ld + j : i + j * m.ld));
}

// gemm: C(m×n) = alpha·op(A)·op(B) + beta·C, op(A) m×k; D = C's storage unless d given.
static void gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha, struct matrix A, struct matrix B,
                 double beta, struct matrix C, void *D, int dtype, int drow, int64_t ldd) {
    for (int64_t j = 0; j < n; j++) {
        for (int64_t i = 0; i < m; i++) {
            double s = 0;
            for (int64_t l = 0; l < k; l++) {
                double a = ta ? at(A, l, i) : at(A, i, l);
                double b = tb ? at(B, j, l) : at(B, l, j);
                s += a * b;
            }
            double v = alpha * s;
            if (beta != 0) v += beta * at(C, i, j);
            store(D, dtype, (size_t)(drow ? i * ldd + j : i + j * ldd), v);
        }
    }
}

// ---- cuBLAS ----

struct handle {
    uint32_t magic;
    void *stream, *ws;
    size_t ws_size;
    int math;
};
#define HANDLE_MAGIC 0x424c4153u

cublasStatus_t cublasCreate_v2(struct handle **h) {
    struct handle *x = calloc(1, sizeof *x);
    x->magic = HANDLE_MAGIC;
    *h = x;
    return SUCCESS;
}

static int handle_ok(struct handle *h) { return h && h->magic == HANDLE_MAGIC; }

cublasStatus_t cublasDestroy_v2(struct handle *h) {
    if (!handle_ok(h)) return NOT_INITIALIZED;
    h->magic = 0;
    free(h);
    return SUCCESS;
}

cublasStatus_t cublasSetStream_v2(struct handle *h, void *s) {
    if (!handle_ok(h)) return NOT_INITIALIZED;
    h->stream = s;
    return SUCCESS;
}

cublasStatus_t cublasSetMathMode(struct handle *h, int mode) {
    if (!handle_ok(h)) return NOT_INITIALIZED;
    if ((mode & ~16) < 0 || (mode & ~16) > 3) return INVALID_VALUE;
    h->math = mode;
    return SUCCESS;
}

cublasStatus_t cublasSetWorkspace_v2(struct handle *h, void *ws, size_t size) {
    if (!handle_ok(h)) return NOT_INITIALIZED;
    if ((size > 0 && !ws) || ((uintptr_t)ws % 256) != 0) return INVALID_VALUE;
    h->ws = ws;
    h->ws_size = size;
    return SUCCESS;
}

cublasStatus_t cublasGetProperty(int type, int *v) {
    static const int version[] = {13, 0, 1};
    if (type < 0 || type > 2) return INVALID_VALUE;
    *v = version[type];
    return SUCCESS;
}

static int algo_ok(int algo) { return algo == -1 || (algo >= 0 && algo <= 23) || (algo >= 99 && algo <= 115); }

static cublasStatus_t check_gemm(struct handle *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A,
                                 int at_, int lda, const void *B, int bt, int ldb, const void *beta, void *C, int ct,
                                 int ldc, int compute, int algo) {
    if (!handle_ok(h)) return NOT_INITIALIZED;
    if (getenv("FAKECUBLAS_ALLOC_FAILED")) return ALLOC_FAILED;
    if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1) || m < 0 || n < 0 || k < 0) return INVALID_VALUE;
    if (!type_ok(at_) || !type_ok(bt) || !type_ok(ct) || !compute_ok(compute) || !algo_ok(algo)) return INVALID_VALUE;
    if (lda < (ta ? k : m) || lda < 1 || ldb < (tb ? n : k) || ldb < 1 || ldc < m || ldc < 1) return INVALID_VALUE;
    if (!alpha || !beta || !A || !B || !C) return INVALID_VALUE;
    return SUCCESS;
}

cublasStatus_t cublasGemmEx(struct handle *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A,
                            int at_, int lda, const void *B, int bt, int ldb, const void *beta, void *C, int ct, int ldc,
                            int compute, int algo) {
    cublasStatus_t rc = check_gemm(h, ta, tb, m, n, k, alpha, A, at_, lda, B, bt, ldb, beta, C, ct, ldc, compute, algo);
    if (rc != SUCCESS) return rc;
    int sc = scale_of(compute);
    struct matrix MA = {A, at_, 0, lda}, MB = {B, bt, 0, ldb}, MC = {C, ct, 0, ldc};
    gemm(ta, tb, m, n, k, scalar(alpha, sc), MA, MB, scalar(beta, sc), MC, C, ct, 0, ldc);
    return SUCCESS;
}

cublasStatus_t cublasGemmStridedBatchedEx(struct handle *h, int ta, int tb, int m, int n, int k, const void *alpha,
                                          const void *A, int at_, int lda, long long sa, const void *B, int bt, int ldb,
                                          long long sb, const void *beta, void *C, int ct, int ldc, long long sc_,
                                          int batch, int compute, int algo) {
    cublasStatus_t rc = check_gemm(h, ta, tb, m, n, k, alpha, A, at_, lda, B, bt, ldb, beta, C, ct, ldc, compute, algo);
    if (rc != SUCCESS) return rc;
    if (batch < 0 || sa < 0 || sb < 0 || sc_ < 0) return INVALID_VALUE;
    int sc = scale_of(compute);
    for (int b = 0; b < batch; b++) {
        const char *pa = (const char *)A + (size_t)b * (size_t)sa * type_size(at_);
        const char *pb = (const char *)B + (size_t)b * (size_t)sb * type_size(bt);
        char *pc = (char *)C + (size_t)b * (size_t)sc_ * type_size(ct);
        struct matrix MA = {pa, at_, 0, lda}, MB = {pb, bt, 0, ldb}, MC = {pc, ct, 0, ldc};
        gemm(ta, tb, m, n, k, scalar(alpha, sc), MA, MB, scalar(beta, sc), MC, pc, ct, 0, ldc);
    }
    return SUCCESS;
}

// ---- cuBLASLt ----

struct lt_handle {
    uint32_t magic;
};
struct lt_desc {
    uint32_t magic;
    int compute, scale, ta, tb;
};
struct lt_layout {
    uint32_t magic;
    int type, order, batch;
    uint64_t rows, cols;
    int64_t ld, stride;
};
struct lt_pref {
    uint32_t magic;
    uint64_t max_ws;
};
typedef struct {
    uint64_t data[8];
} lt_algo;
typedef struct {
    lt_algo algo;
    size_t workspaceSize;
    cublasStatus_t state;
    float wavesCount;
    int reserved[4];
} lt_result;

#define LT_MAGIC 0x4c54484eu
#define DESC_MAGIC 0x4c544445u
#define LAYOUT_MAGIC 0x4c544c41u
#define PREF_MAGIC 0x4c545052u

static const size_t algo_ws[] = {0, 4096, 1 << 20};

size_t cublasLtGetVersion(void) { return 130001; }

cublasStatus_t cublasLtCreate(struct lt_handle **h) {
    struct lt_handle *x = calloc(1, sizeof *x);
    x->magic = LT_MAGIC;
    *h = x;
    return SUCCESS;
}

cublasStatus_t cublasLtDestroy(struct lt_handle *h) {
    if (!h || h->magic != LT_MAGIC) return NOT_INITIALIZED;
    h->magic = 0;
    free(h);
    return SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(struct lt_desc **d, int compute, int scale) {
    if (!compute_ok(compute) || scale != scale_of(compute)) return INVALID_VALUE;
    struct lt_desc *x = calloc(1, sizeof *x);
    x->magic = DESC_MAGIC;
    x->compute = compute;
    x->scale = scale;
    *d = x;
    return SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(struct lt_desc *d) {
    if (!d || d->magic != DESC_MAGIC) return INVALID_VALUE;
    d->magic = 0;
    free(d);
    return SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(struct lt_desc *d, int attr, const void *buf, size_t size) {
    if (!d || d->magic != DESC_MAGIC || !buf || size != 4) return INVALID_VALUE;
    int32_t v = *(const int32_t *)buf;
    switch (attr) {
    case 3: if (v != 0 && v != 1) return INVALID_VALUE; d->ta = v; return SUCCESS;
    case 4: if (v != 0 && v != 1) return INVALID_VALUE; d->tb = v; return SUCCESS;
    }
    return INVALID_VALUE;
}

cublasStatus_t cublasLtMatrixLayoutCreate(struct lt_layout **l, int type, uint64_t rows, uint64_t cols, int64_t ld) {
    if (!type_ok(type) || ld < (int64_t)rows || ld < 1) return INVALID_VALUE;
    struct lt_layout *x = calloc(1, sizeof *x);
    x->magic = LAYOUT_MAGIC;
    x->type = type;
    x->rows = rows;
    x->cols = cols;
    x->ld = ld;
    x->batch = 1;
    *l = x;
    return SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(struct lt_layout *l) {
    if (!l || l->magic != LAYOUT_MAGIC) return INVALID_VALUE;
    l->magic = 0;
    free(l);
    return SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(struct lt_layout *l, int attr, const void *buf, size_t size) {
    if (!l || l->magic != LAYOUT_MAGIC || !buf) return INVALID_VALUE;
    switch (attr) {
    case 1: if (size != 4) return INVALID_VALUE; l->order = *(const int32_t *)buf; return SUCCESS;
    case 5: if (size != 4 || *(const int32_t *)buf < 1) return INVALID_VALUE; l->batch = *(const int32_t *)buf; return SUCCESS;
    case 6: if (size != 8) return INVALID_VALUE; l->stride = *(const int64_t *)buf; return SUCCESS;
    }
    return INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(struct lt_pref **p) {
    struct lt_pref *x = calloc(1, sizeof *x);
    x->magic = PREF_MAGIC;
    *p = x;
    return SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(struct lt_pref *p) {
    if (!p || p->magic != PREF_MAGIC) return INVALID_VALUE;
    p->magic = 0;
    free(p);
    return SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(struct lt_pref *p, int attr, const void *buf, size_t size) {
    if (!p || p->magic != PREF_MAGIC || !buf) return INVALID_VALUE;
    if (attr == 1) {
        if (size != 8) return INVALID_VALUE;
        p->max_ws = *(const uint64_t *)buf;
        return SUCCESS;
    }
    if (attr >= 5 && attr <= 8) return size == 4 ? SUCCESS : INVALID_VALUE; // minimum alignments
    return INVALID_VALUE;
}

static int ok(const void *p, uint32_t magic) { return p && *(const uint32_t *)p == magic; }

// shape checks op(A)·op(B) → C for column-major layouts and returns m, n, k.
static cublasStatus_t shape(struct lt_desc *d, struct lt_layout *a, struct lt_layout *b, struct lt_layout *c,
                            struct lt_layout *dd, uint64_t *m, uint64_t *n, uint64_t *k) {
    if (!ok(d, DESC_MAGIC) || !ok(a, LAYOUT_MAGIC) || !ok(b, LAYOUT_MAGIC) || !ok(c, LAYOUT_MAGIC) || !ok(dd, LAYOUT_MAGIC))
        return INVALID_VALUE;
    uint64_t am = d->ta ? a->cols : a->rows, ak = d->ta ? a->rows : a->cols;
    uint64_t bk = d->tb ? b->cols : b->rows, bn = d->tb ? b->rows : b->cols;
    if (ak != bk || am != c->rows || bn != c->cols || c->rows != dd->rows || c->cols != dd->cols) return INVALID_VALUE;
    if (a->batch != c->batch || b->batch != c->batch || dd->batch != c->batch) return INVALID_VALUE;
    *m = am, *n = bn, *k = ak;
    return SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(struct lt_handle *h, struct lt_desc *d, struct lt_layout *a,
                                              struct lt_layout *b, struct lt_layout *c, struct lt_layout *dd,
                                              struct lt_pref *p, int requested, lt_result *res, int *returned) {
    if (!ok(h, LT_MAGIC) || !ok(p, PREF_MAGIC) || requested <= 0 || !res || !returned) return INVALID_VALUE;
    uint64_t m, n, k;
    cublasStatus_t rc = shape(d, a, b, c, dd, &m, &n, &k);
    if (rc != SUCCESS) return rc;
    int got = 0;
    for (int id = 1; id <= 3 && got < requested; id++) {
        if (algo_ws[id - 1] > p->max_ws) continue;
        memset(&res[got], 0, sizeof res[got]);
        res[got].algo.data[0] = (uint64_t)id;
        res[got].workspaceSize = algo_ws[id - 1];
        res[got].state = SUCCESS;
        res[got].wavesCount = 0.5f * (float)id;
        got++;
    }
    *returned = got;
    return got ? SUCCESS : NOT_SUPPORTED;
}

cublasStatus_t cublasLtMatmul(struct lt_handle *h, struct lt_desc *d, const void *alpha, const void *A,
                              struct lt_layout *a, const void *B, struct lt_layout *b, const void *beta, const void *C,
                              struct lt_layout *c, void *D, struct lt_layout *dd, const lt_algo *algo, void *ws,
                              size_t ws_size, void *stream) {
    (void)stream;
    if (!ok(h, LT_MAGIC) || !alpha || !beta || !A || !B || !C || !D) return INVALID_VALUE;
    if (getenv("FAKECUBLAS_ALLOC_FAILED")) return ALLOC_FAILED;
    uint64_t m, n, k;
    cublasStatus_t rc = shape(d, a, b, c, dd, &m, &n, &k);
    if (rc != SUCCESS) return rc;
    if (ws_size > 0 && !ws) return INVALID_VALUE;
    if (algo) {
        uint64_t id = algo->data[0];
        if (id < 1 || id > 3 || algo->data[1] != 0 || ws_size < algo_ws[id - 1]) return INVALID_VALUE;
    }
    for (int i = 0; i < c->batch; i++) {
        const char *pa = (const char *)A + (size_t)(i * a->stride) * type_size(a->type);
        const char *pb = (const char *)B + (size_t)(i * b->stride) * type_size(b->type);
        const char *pc = (const char *)C + (size_t)(i * c->stride) * type_size(c->type);
        char *pd = (char *)D + (size_t)(i * dd->stride) * type_size(dd->type);
        struct matrix MA = {pa, a->type, a->order == 1, a->ld}, MB = {pb, b->type, b->order == 1, b->ld},
                      MC = {pc, c->type, c->order == 1, c->ld};
        gemm(d->ta, d->tb, (int64_t)m, (int64_t)n, (int64_t)k, scalar(alpha, d->scale), MA, MB, scalar(beta, d->scale),
             MC, pd, dd->type, dd->order == 1, dd->ld);
    }
    return SUCCESS;
}
