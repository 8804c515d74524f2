// Tessera's native LoRA term: for every row t of a group of rows that name one adapter,
//   y[t, offset + i] += scale · Σ_q B[i, q] (Σ_k A[q, k] x[t, k])
// A [rank, inDim] row-major, B given transposed (bT [rank, outDim], row-major), f32. The low-rank
// products of src/engine/lora-rows.ts on AVX2 + FMA instead of scalar TypeScript.
// A·x: eight lanes over k (fused multiply-add into one accumulator per (row, q), masked loads for
// the tail), then a fixed horizontal sum; four q and two rows per pass share the loads of A and x.
// B·(A·x): eight outputs at a time, q ascending into one accumulator, then y += scale · acc.
// Every (row, q) and (row, i) runs the same operations in the same order whatever rows share the
// call: a row's output does not depend on its neighbours (--deterministic), only on this code
// (not the TypeScript path's bits: its sums run in double, these in single, within ~1e-6).
// half: the adapter file stored A and B as f16/bf16; x and A·x are rounded to f16 (F16C, round
// to nearest even) before each product, as llama.cpp's CPU backend rounds a half matmul's input.
// Compiled with AVX2 + FMA + F16C (both addon variants have them); single-threaded (a decode
// step's groups are small).
#include <immintrin.h>
#include <node_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dense.h"

static inline float hsum8(__m256 v) {
  // (l0 + l4), (l1 + l5), (l2 + l6), (l3 + l7); then (0 + 2), (1 + 3); then their sum.
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

static inline __m256 toHalf8(__m256 v) { return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)); }

static inline float toHalf1(float v) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(v), _MM_FROUND_TO_NEAREST_INT))); }

// Lane mask for the last inDim % 8 elements.
static inline __m256i tailMask(int n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx);
}

// tmp[r * rank + q] = A[q] · xs[r] for nr (1 or 2) rows of xs (each inDim long, at xs[r]).
static void lowRank(const float* a, int rank, int inDim, const float* const* xs, int nr, float* tmp) {
  const int k8 = inDim & ~7;
  const __m256i mask = tailMask(inDim - k8);
  int q = 0;
  for (; q + 4 <= rank; q += 4) {
    const float* a0 = a + (size_t)q * inDim;
    const float* a1 = a0 + inDim;
    const float* a2 = a1 + inDim;
    const float* a3 = a2 + inDim;
    __m256 s[2][4];
    for (int r = 0; r < 2; r++)
      for (int c = 0; c < 4; c++) s[r][c] = _mm256_setzero_ps();
    for (int k = 0; k <= k8; k += 8) {
      const int tail = k == k8;
      if (tail && k8 == inDim) break;
      __m256 w0, w1, w2, w3;
      if (!tail) {
        w0 = _mm256_loadu_ps(a0 + k), w1 = _mm256_loadu_ps(a1 + k), w2 = _mm256_loadu_ps(a2 + k);
        w3 = _mm256_loadu_ps(a3 + k);
      } else {
        w0 = _mm256_maskload_ps(a0 + k, mask), w1 = _mm256_maskload_ps(a1 + k, mask);
        w2 = _mm256_maskload_ps(a2 + k, mask), w3 = _mm256_maskload_ps(a3 + k, mask);
      }
      for (int r = 0; r < nr; r++) {
        const __m256 xv = tail ? _mm256_maskload_ps(xs[r] + k, mask) : _mm256_loadu_ps(xs[r] + k);
        s[r][0] = _mm256_fmadd_ps(w0, xv, s[r][0]);
        s[r][1] = _mm256_fmadd_ps(w1, xv, s[r][1]);
        s[r][2] = _mm256_fmadd_ps(w2, xv, s[r][2]);
        s[r][3] = _mm256_fmadd_ps(w3, xv, s[r][3]);
      }
    }
    for (int r = 0; r < nr; r++)
      for (int c = 0; c < 4; c++) tmp[(size_t)r * rank + q + c] = hsum8(s[r][c]);
  }
  for (; q < rank; q++) {
    const float* a0 = a + (size_t)q * inDim;
    __m256 s[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int k = 0; k <= k8; k += 8) {
      const int tail = k == k8;
      if (tail && k8 == inDim) break;
      const __m256 w0 = tail ? _mm256_maskload_ps(a0 + k, mask) : _mm256_loadu_ps(a0 + k);
      for (int r = 0; r < nr; r++) {
        const __m256 xv = tail ? _mm256_maskload_ps(xs[r] + k, mask) : _mm256_loadu_ps(xs[r] + k);
        s[r] = _mm256_fmadd_ps(w0, xv, s[r]);
      }
    }
    for (int r = 0; r < nr; r++) tmp[(size_t)r * rank + q] = hsum8(s[r]);
  }
}

// yRow[i] += scale · Σ_q bT[q, i] tmp[q], i in [0, outDim).
static void expand(const float* bT, int rank, int outDim, const float* tmp, float scale, float* yRow) {
  const __m256 sv = _mm256_set1_ps(scale);
  int i = 0;
  for (; i + 8 <= outDim; i += 8) {
    __m256 acc = _mm256_setzero_ps();
    for (int q = 0; q < rank; q++)
      acc = _mm256_fmadd_ps(_mm256_loadu_ps(bT + (size_t)q * outDim + i), _mm256_set1_ps(tmp[q]), acc);
    _mm256_storeu_ps(yRow + i, _mm256_fmadd_ps(sv, acc, _mm256_loadu_ps(yRow + i)));
  }
  if (i < outDim) {
    const __m256i mask = tailMask(outDim - i);
    __m256 acc = _mm256_setzero_ps();
    for (int q = 0; q < rank; q++)
      acc = _mm256_fmadd_ps(_mm256_maskload_ps(bT + (size_t)q * outDim + i, mask), _mm256_set1_ps(tmp[q]), acc);
    _mm256_maskstore_ps(yRow + i, mask, _mm256_fmadd_ps(sv, acc, _mm256_maskload_ps(yRow + i, mask)));
  }
}

// ---------------------------------------------------------------- Node-API glue
static int f32ArgL(napi_env env, napi_value v, float** data, size_t* length) {
  napi_typedarray_type type;
  napi_value ab;
  size_t offset;
  void* p;
  if (napi_get_typedarray_info(env, v, &type, length, &p, &ab, &offset) != napi_ok || type != napi_float32_array)
    return 0;
  *data = (float*)p;
  return 1;
}

static int i32ArgL(napi_env env, napi_value v, int32_t** data, size_t* length) {
  napi_typedarray_type type;
  napi_value ab;
  size_t offset;
  void* p;
  if (napi_get_typedarray_info(env, v, &type, length, &p, &ab, &offset) != napi_ok || type != napi_int32_array)
    return 0;
  *data = (int32_t*)p;
  return 1;
}

static int intArgL(napi_env env, napi_value v, int* out) { return napi_get_value_int32(env, v, out) == napi_ok; }

// loraRows(a, bT, x, rows, numRows, y, rank, inDim, outDim, width, offset, scale, half): the term above
// for rows[0, numRows) (row indices into x [T, inDim] and y [T, width]). Shapes and every row index
// are checked here: a bad one throws (RangeError) with nothing written.
napi_value tesseraLoraRows(napi_env env, napi_callback_info info) {
  size_t argc = 13;
  napi_value argv[13];
  float *a, *bT, *x, *y;
  int32_t* rows;
  size_t aLen, bLen, xLen, yLen, rowsLen;
  int numRows, rank, inDim, outDim, width, offset, half;
  double scale;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 13 || !f32ArgL(env, argv[0], &a, &aLen) ||
      !f32ArgL(env, argv[1], &bT, &bLen) || !f32ArgL(env, argv[2], &x, &xLen) || !i32ArgL(env, argv[3], &rows, &rowsLen) ||
      !intArgL(env, argv[4], &numRows) || !f32ArgL(env, argv[5], &y, &yLen) || !intArgL(env, argv[6], &rank) ||
      !intArgL(env, argv[7], &inDim) || !intArgL(env, argv[8], &outDim) || !intArgL(env, argv[9], &width) ||
      !intArgL(env, argv[10], &offset) || napi_get_value_double(env, argv[11], &scale) != napi_ok ||
      !intArgL(env, argv[12], &half)) {
    napi_throw_type_error(env, NULL, "loraRows(a, bT, x, rows, numRows, y, rank, inDim, outDim, width, offset, scale, half): bad arguments");
    return NULL;
  }
  if (rank < 1 || inDim < 1 || outDim < 1 || offset < 0 || width < offset + outDim || numRows < 0 || (size_t)numRows > rowsLen ||
      aLen < (size_t)rank * inDim || bLen < (size_t)rank * outDim) {
    napi_throw_range_error(env, NULL, "loraRows: shapes do not fit the arrays");
    return NULL;
  }
  const size_t xRows = xLen / (size_t)inDim, yRows = yLen / (size_t)width;
  for (int r = 0; r < numRows; r++)
    if (rows[r] < 0 || (size_t)rows[r] >= xRows || (size_t)rows[r] >= yRows) {
      napi_throw_range_error(env, NULL, "loraRows: a row index is outside x or y");
      return NULL;
    }
  if (tesseraVariant() < 0) {
    napi_throw_error(env, NULL, "loraRows: this CPU has neither AVX-512 nor AVX2 + FMA + F16C");
    return NULL;
  }
  // Scratch: two rows of A·x, and with half two rows of rounded x.
  float tmpStack[2 * 256];
  float* tmp = rank <= 256 ? tmpStack : (float*)malloc(sizeof(float) * 2 * (size_t)rank);
  float* xh = half ? (float*)malloc(sizeof(float) * 2 * (size_t)inDim) : NULL;
  if (tmp == NULL || (half && xh == NULL)) {
    if (tmp != tmpStack) free(tmp);
    free(xh);
    napi_throw_error(env, NULL, "loraRows: out of memory");
    return NULL;
  }
  for (int r = 0; r < numRows; r += 2) {
    const int nr = r + 1 < numRows ? 2 : 1;
    const float* xs[2];
    for (int s = 0; s < nr; s++) {
      const float* row = x + (size_t)rows[r + s] * inDim;
      if (!half) {
        xs[s] = row;
        continue;
      }
      float* h = xh + (size_t)s * inDim;
      int k = 0;
      for (; k + 8 <= inDim; k += 8) _mm256_storeu_ps(h + k, toHalf8(_mm256_loadu_ps(row + k)));
      for (; k < inDim; k++) h[k] = toHalf1(row[k]);
      xs[s] = h;
    }
    lowRank(a, rank, inDim, xs, nr, tmp);
    if (half)
      for (int q = 0; q < nr * rank; q++) tmp[q] = toHalf1(tmp[q]);
    for (int s = 0; s < nr; s++)
      expand(bT, rank, outDim, tmp + (size_t)s * rank, (float)scale, y + (size_t)rows[r + s] * width + offset);
  }
  if (tmp != tmpStack) free(tmp);
  free(xh);
  return NULL;
}
