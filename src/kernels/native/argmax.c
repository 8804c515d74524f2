// Tessera's native argmax over a row of logits: the lowest index of the largest value, NaN never
// chosen, -1 when no value is above -infinity: model/sampler.ts's argmax, the same index always
// (a tie goes to the lower index, as one scan in index order would give), in ~1/10 of its time.
// Baseline x86-64 (SSE2), so it runs on any CPU the addon loads on; registered by dense.c.
// Never writes anything; reads only the array it is given.
#include <emmintrin.h>
#include <math.h>
#include <node_api.h>
#include <stddef.h>
#include <stdint.h>

// LANES lanes (vectors of four, independent chains): lane k keeps the first index of its largest
// value among indexes = k (mod LANES), as the comparisons are strict; then the lanes merge by
// value, then index, and the tail (indexes above every lane's) only by a larger value.
#define LANES 16
static int argmaxF32(const float* x, size_t n) {
  __m128 v[LANES / 4];
  __m128i id[LANES / 4], at[LANES / 4];
  for (int k = 0; k < LANES / 4; k++) {
    v[k] = _mm_set1_ps(-INFINITY);
    id[k] = _mm_set1_epi32(-1);
    at[k] = _mm_setr_epi32(4 * k, 4 * k + 1, 4 * k + 2, 4 * k + 3);
  }
  const __m128i step = _mm_set1_epi32(LANES);
  const size_t whole = n - n % LANES;
  for (size_t i = 0; i < whole; i += LANES)
    for (int k = 0; k < LANES / 4; k++) {
      const __m128 a = _mm_loadu_ps(x + i + 4 * k);
      const __m128 gt = _mm_cmpgt_ps(a, v[k]);  // false for a NaN
      v[k] = _mm_or_ps(_mm_and_ps(gt, a), _mm_andnot_ps(gt, v[k]));
      id[k] = _mm_or_si128(_mm_and_si128(_mm_castps_si128(gt), at[k]), _mm_andnot_si128(_mm_castps_si128(gt), id[k]));
      at[k] = _mm_add_epi32(at[k], step);
    }
  float values[LANES];
  int32_t ids[LANES];
  for (int k = 0; k < LANES / 4; k++) {
    _mm_storeu_ps(values + 4 * k, v[k]);
    _mm_storeu_si128((__m128i*)(ids + 4 * k), id[k]);
  }
  int best = -1;
  float bestValue = -INFINITY;
  for (int k = 0; k < LANES; k++)
    if (ids[k] >= 0 && (values[k] > bestValue || (values[k] == bestValue && ids[k] < best))) {
      bestValue = values[k];
      best = ids[k];
    }
  for (size_t i = whole; i < n; i++)
    if (x[i] > bestValue) {
      bestValue = x[i];
      best = (int)i;
    }
  return best;
}

// argmax(x: Float32Array): the lowest index of the largest value; -1 when every value is -inf or NaN.
napi_value tesseraArgmax(napi_env env, napi_callback_info info) {
  size_t argc = 1, length, offset;
  napi_value argv[1], ab, result;
  napi_typedarray_type type;
  void* data;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 1 ||
      napi_get_typedarray_info(env, argv[0], &type, &length, &data, &ab, &offset) != napi_ok ||
      type != napi_float32_array || length > 0x7FFFFFFF) {
    napi_throw_type_error(env, NULL, "argmax(x: Float32Array): bad arguments");
    return NULL;
  }
  if (napi_create_int32(env, length == 0 ? -1 : argmaxF32((const float*)data, length), &result) != napi_ok) return NULL;
  return result;
}
