// Tessera's native row ops: RMSNorm, SiLU·mul (over a fused gate | up row, or two arrays) and
// x += y, with the arithmetic of the wasm kernels (src/kernels/wasm/assembly/ops.ts, simd.ts's
// expF32x4) step for step, so every output is bit for bit what WasmOps gives: the same IEEE
// single operations in the same order (no fused multiply-add: compiled with -ffp-contract=off and
// without -mfma), RMSNorm's sum of squares in four lanes with hsum's pairing. Elementwise work
// takes eight lanes at a time (each lane's arithmetic is its own). Compiled with AVX2 (+F16C)
// only, called only through the addon's variant check (both variants have AVX2). native-ops.ts
// is its TypeScript side.
//
// A call shares its rows with dense.c's helper threads (tesseraShare) when asked and large
// enough: a prefill chunk's ops then run on every core instead of the engine thread alone while
// the helpers wait for the next matmul. Each row is computed whole by one thread, by the same
// code: the bits do not depend on who computed it.
#include <immintrin.h>
#include <math.h>
#include <node_api.h>
#include <stdint.h>

#include "dense.h"

// Calls with fewer elements than this run on the calling thread alone.
#define SHARE_MIN_ELEMENTS (32 * 1024)

// simd.ts's expF32x4, eight lanes: Cephes' expf polynomial, inputs clamped to [-87.3, 88.3].
static inline __m256 expWasm(__m256 x) {
  // min / max with the constant first: a nan x is returned (x86 gives the second operand), as wasm's min / max.
  __m256 xc = _mm256_max_ps(_mm256_set1_ps(-87.3f), _mm256_min_ps(_mm256_set1_ps(88.3f), x));
  __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_sub_ps(xc, _mm256_mul_ps(n, _mm256_set1_ps(0.693359375f)));
  r = _mm256_sub_ps(r, _mm256_mul_ps(n, _mm256_set1_ps(-2.12194440e-4f)));
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(p, r), r), r), _mm256_set1_ps(1.0f));
  __m256i pow2n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(pow2n));
}

// ops.ts's siluMul4: (g * (1 / (1 + exp(-g)))) * u.
static inline __m256 siluMul8(__m256 g, __m256 u) {
  __m256 e = expWasm(_mm256_xor_ps(g, _mm256_set1_ps(-0.0f)));
  __m256 sigmoid = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
  return _mm256_mul_ps(_mm256_mul_ps(g, sigmoid), u);
}

// out[0, n) = silu(g) * u; the tail through the same lanes.
static void siluMulSpan(const float* g, const float* u, float* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, siluMul8(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i)));
  for (; i < n; i++) _mm_store_ss(out + i, _mm256_castps256_ps128(siluMul8(_mm256_set1_ps(g[i]), _mm256_set1_ps(u[i]))));
}

// ops.ts's rmsNorm for one row: four-lane sum of squares (mul, then add), hsum (v0 + v2) + (v1 + v3),
// the tail's squares added in order, scale = 1 / sqrt(sum / dim + eps), out = (x * scale) * weight.
static void rmsNormRow(const float* x, const float* weight, float eps, int dim, float* out) {
  const int n4 = dim & ~3;
  __m128 acc = _mm_setzero_ps();
  for (int i = 0; i < n4; i += 4) {
    __m128 v = _mm_loadu_ps(x + i);
    acc = _mm_add_ps(acc, _mm_mul_ps(v, v));
  }
  float lanes[4];
  _mm_storeu_ps(lanes, acc);
  float sum = (lanes[0] + lanes[2]) + (lanes[1] + lanes[3]);
  for (int i = n4; i < dim; i++) sum += x[i] * x[i];
  const float scale = 1.0f / sqrtf(sum / (float)dim + eps);
  const __m256 sv = _mm256_set1_ps(scale);
  int i = 0;
  for (; i + 8 <= dim; i += 8)
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), sv), _mm256_loadu_ps(weight + i)));
  for (; i < dim; i++) out[i] = x[i] * scale * weight[i];
}

// Elementwise ops (2, 3) go in spans of this many elements.
#define SPAN 4096

typedef struct {
  int op;  // 0 rmsNorm, 1 siluMul over fused rows (items: rows); 2 out += y, 3 siluMul (items: spans)
  const float *x, *y, *weight;
  float* out;
  float eps;
  int width, rows;
} RowJob;

static int rowChunk(void* ctx, int i0, int i1) {
  const RowJob* j = (const RowJob*)ctx;
  const size_t w = (size_t)j->width, n = (size_t)j->rows * w;
  for (int i = i0; i < i1; i++) {
    const size_t at = (size_t)i * (j->op >= 2 ? SPAN : w), len = j->op >= 2 && n - at < SPAN ? n - at : SPAN;
    if (j->op == 0) rmsNormRow(j->x + at, j->weight, j->eps, j->width, j->out + at);
    else if (j->op == 1) siluMulSpan(j->x + 2 * at, j->x + 2 * at + w, j->out + at, w);
    else if (j->op == 3) siluMulSpan(j->x + at, j->y + at, j->out + at, len);
    else {
      float* x = j->out + at;
      const float* y = j->y + at;
      size_t k = 0;
      for (; k + 8 <= len; k += 8) _mm256_storeu_ps(x + k, _mm256_add_ps(_mm256_loadu_ps(x + k), _mm256_loadu_ps(y + k)));
      for (; k < len; k++) x[k] = x[k] + y[k];
    }
  }
  return 1;
}

static void runRows(RowJob* j, int helpers) {
  const size_t n = (size_t)j->rows * j->width;
  const int items = j->op >= 2 ? (int)((n + SPAN - 1) / SPAN) : j->rows;
  const int threads = tesseraThreads();
  const int share = helpers && n >= SHARE_MIN_ELEMENTS && threads > 1;
  // About four chunks per thread: the hand-out costs little against them.
  const int per = share ? (items + 4 * threads - 1) / (4 * threads) : items;
  tesseraShare(rowChunk, j, items, per < 1 ? 1 : per, share);
}

// ---------------------------------------------------------------- Node-API glue
static int f32Arg(napi_env env, napi_value v, float** data, size_t* length) {
  napi_typedarray_type type;
  napi_value ab;
  size_t offset;
  void* p;
  if (napi_get_typedarray_info(env, v, &type, length, &p, &ab, &offset) != napi_ok || type != napi_float32_array)
    return 0;
  *data = (float*)p;
  return 1;
}

static int intArgR(napi_env env, napi_value v, int* out) { return napi_get_value_int32(env, v, out) == napi_ok; }

// rowOp(op, x, y | weight | null, out, rows, width, eps, helpers):
//   0 rmsNorm: out[r] = rmsNorm(x[r], weight) over rows of width (out may be x);
//   1 siluMul: out[r, i] = silu(x[r, i]) * x[r, width + i] (x: rows of gate | up, 2 width);
//   2 add: out[r] += y[r] (out's and y's rows of width; x unused, pass out);
//   3 siluMul: out[i] = silu(x[i]) * y[i] over rows x width elements.
// Lengths are checked here: a short array throws a RangeError with nothing written.
napi_value tesseraRowOp(napi_env env, napi_callback_info info) {
  size_t argc = 8;
  napi_value argv[8];
  int op, rows, width, helpers;
  double eps;
  float *x, *y = NULL, *out;
  size_t xLen, yLen = 0, outLen;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 8 || !intArgR(env, argv[0], &op) ||
      !f32Arg(env, argv[1], &x, &xLen) || !f32Arg(env, argv[3], &out, &outLen) || !intArgR(env, argv[4], &rows) ||
      !intArgR(env, argv[5], &width) || napi_get_value_double(env, argv[6], &eps) != napi_ok ||
      !intArgR(env, argv[7], &helpers) || op < 0 || op > 3 || rows < 0 || width <= 0 ||
      (op != 1 && !f32Arg(env, argv[2], &y, &yLen))) {
    napi_throw_type_error(env, NULL, "rowOp(op, x, y, out, rows, width, eps, helpers): bad arguments");
    return NULL;
  }
  const size_t n = (size_t)rows * width;
  const size_t xNeed = op == 1 ? 2 * n : op == 2 ? 0 : n, yNeed = op == 0 ? (size_t)width : op == 1 ? 0 : n;
  if (xLen < xNeed || yLen < yNeed || outLen < n) {
    napi_throw_range_error(env, NULL, "rowOp: an array is too short for rows x width");
    return NULL;
  }
  if (tesseraVariant() < 0) {
    napi_throw_error(env, NULL, "rowOp: this CPU has neither AVX-512 nor AVX2 + FMA + F16C");
    return NULL;
  }
  RowJob j = {.op = op, .x = x, .y = y, .weight = y, .out = out, .eps = (float)eps, .width = width, .rows = rows};
  if (rows > 0) runRows(&j, helpers);
  return NULL;
}
