// Tessera's native paged attention for AVX2 with FMA and F16C: attention.c's contract (its
// header) with eight lanes where attention-avx512.c has sixteen. AVX2 has no masked loads of
// halves or bytes, so a head's tail (headDim not a multiple of 8) is read through a zero-padded
// copy and written through one; each (token, head) is still computed by the same arithmetic
// whatever numTokens is. Compiled alone with -mavx2 -mfma -mf16c (scripts/build-native.mjs);
// attention.c calls it only when dense.c chose the AVX2 variant. Never allocates.
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "attention.h"

// attention-avx512.c's exp512 with 8 lanes (the same coefficients; 0 below -87.3, nan stays nan).
static inline __m256 exp256(__m256 x) {
  __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_LT_OQ);
  x = _mm256_min_ps(_mm256_set1_ps(88.3f), x);
  __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(tiny, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

static inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// Elements [i, i + 8) of a row (f32, f16 or, kind 2, q8_0's int8 values at p) as f32, those
// at or past `left` read as 0.
static inline __attribute__((always_inline)) __m256 load8(int kind, const void* p, int left) {
  if (left >= 8) {
    if (kind == 0) return _mm256_loadu_ps((const float*)p);
    if (kind == 1) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)p)));
  }
  if (left <= 0) return _mm256_setzero_ps();
  uint8_t t[32] = {0};
  memcpy(t, p, (size_t)left * (kind == 0 ? 4 : kind == 1 ? 2 : 1));
  return load8(kind, t, 8);
}

static inline void store8(float* p, __m256 v, int left) {
  if (left >= 8) _mm256_storeu_ps(p, v);
  else if (left > 0) {
    float t[8];
    _mm256_storeu_ps(t, v);
    memcpy(p, t, (size_t)left * 4);
  }
}

static inline float q8Scale(const uint8_t* p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// scores[j - lo] = scale * q . K[j] for j in [lo, n). f32 / f16: one FMA chain of 8 lanes over
// the head; q8_0: per block of 32, the dot with the widened int8 values times the block's d.
static inline __attribute__((always_inline)) void qk(const Attn* a, int kind, int kvh, int lo, int n, const float* q,
                                                      float* scores) {
  const int hd = a->headDim;
  const size_t rowBytes = a->rowBytes;
  const size_t e = kind == 0 ? 4 : 2;
  FOR_ROWS(a, 0, kvh, lo, n, {
    __m256 acc = _mm256_setzero_ps();
    if (kind == 2) {
      for (int i = 0; i < hd; i += 32) {
        const uint8_t* blk = row + 34 * (i / 32);
        __m256 s = _mm256_mul_ps(load8(0, q + i, hd - i), load8(2, blk + 2, hd - i));
        for (int v = 8; v < 32 && i + v < hd; v += 8)
          s = _mm256_fmadd_ps(load8(0, q + i + v, hd - i - v), load8(2, blk + 2 + v, hd - i - v), s);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(q8Scale(blk)), s, acc);
      }
    } else {
      for (int i = 0; i < hd; i += 8) acc = _mm256_fmadd_ps(load8(0, q + i, hd - i), load8(kind, row + e * i, hd - i), acc);
    }
    scores[j - lo] = hsum8(acc) * a->scale;
  })
}

// out[i0, i0 + 8 NV) of one head = inverse * Σ_j scores[j - lo] V[j] (q8_0: scores * d), in
// position order, NV vectors in registers (NV a constant). i0 is a multiple of 64.
static inline __attribute__((always_inline)) void values(const Attn* a, int kind, int NV, int kvh, int lo, int n,
                                                          int i0, const float* scores, float inverse, float* out) {
  const int hd = a->headDim;
  const size_t rowBytes = a->rowBytes;
  const size_t e = kind == 0 ? 4 : 2;
  __m256 acc[8];
  for (int v = 0; v < NV; v++) acc[v] = _mm256_setzero_ps();
  FOR_ROWS(a, 1, kvh, lo, n, {
    const float s = scores[j - lo];
    if (kind == 2) {
      for (int v = 0; v < NV; v += 4) {  // a block of 32: four vectors
        const int i = i0 + 8 * v;
        const uint8_t* blk = row + 34 * (i / 32);
        const __m256 wd = _mm256_set1_ps(s * q8Scale(blk));
        for (int u = v; u < v + 4 && u < NV; u++)
          acc[u] = _mm256_fmadd_ps(wd, load8(2, blk + 2 + 8 * (u - v), hd - i0 - 8 * u), acc[u]);
      }
    } else {
      const __m256 w = _mm256_set1_ps(s);
      for (int v = 0; v < NV; v++) acc[v] = _mm256_fmadd_ps(w, load8(kind, row + e * (i0 + 8 * v), hd - i0 - 8 * v), acc[v]);
    }
  })
  for (int v = 0; v < NV; v++) store8(out + i0 + 8 * v, _mm256_mul_ps(acc[v], _mm256_set1_ps(inverse)), hd - i0 - 8 * v);
}

// out[t, h] for one (token, head): scores, softmax, the weighted sum of V, in position order.
static inline __attribute__((always_inline)) void oneHead(const Attn* a, int kind, int t, int h, float* scores) {
  const int hd = a->headDim, n = a->startPos + t + 1;
  const int lo = a->window > 0 && n - a->window > 0 ? n - a->window : 0;
  const int kvh = (int)((long)h * a->numKvHeads / a->numHeads);
  const float* q = a->q + ((size_t)t * a->numHeads + h) * hd;
  float* out = a->out + ((size_t)t * a->numHeads + h) * hd;
  qk(a, kind, kvh, lo, n, q, scores);
  // The largest score (a nan anywhere makes it nan, as Math.max would); the tail's lanes -inf.
  const int count = n - lo;
  for (int j = count; j < (count + 7) / 8 * 8; j++) scores[j] = -INFINITY;
  __m256 max8 = _mm256_set1_ps(-INFINITY);
  int nan = 0;
  for (int j = 0; j < count; j += 8) {
    __m256 v = _mm256_loadu_ps(scores + j);
    nan |= _mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    max8 = _mm256_max_ps(max8, v);
  }
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(max8), _mm256_extractf128_ps(max8, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  const float max = nan ? NAN : sinkMax(a, h, _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4))));
  __m256 mv = _mm256_set1_ps(max), sum8 = _mm256_setzero_ps();
  for (int j = 0; j < count; j += 8) {
    __m256 ex = exp256(_mm256_sub_ps(_mm256_loadu_ps(scores + j), mv));  // the tail's: exp(-inf) = 0
    if (count - j < 8) ex = _mm256_and_ps(ex, _mm256_castsi256_ps(_mm256_cmpgt_epi32(
                                                  _mm256_set1_epi32(count - j), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))));
    _mm256_storeu_ps(scores + j, ex);
    sum8 = _mm256_add_ps(sum8, ex);
  }
  const float inverse = 1.0f / (hsum8(sum8) + sinkTerm(a, h, max));
  for (int i0 = 0; i0 < hd; i0 += 64) {
    switch ((hd - i0 + 7) / 8 < 8 ? (hd - i0 + 7) / 8 : 8) {
      case 1: values(a, kind, 1, kvh, lo, n, i0, scores, inverse, out); break;
      case 2: values(a, kind, 2, kvh, lo, n, i0, scores, inverse, out); break;
      case 3: values(a, kind, 3, kvh, lo, n, i0, scores, inverse, out); break;
      case 4: values(a, kind, 4, kvh, lo, n, i0, scores, inverse, out); break;
      case 5: values(a, kind, 5, kvh, lo, n, i0, scores, inverse, out); break;
      case 6: values(a, kind, 6, kvh, lo, n, i0, scores, inverse, out); break;
      case 7: values(a, kind, 7, kvh, lo, n, i0, scores, inverse, out); break;
      default: values(a, kind, 8, kvh, lo, n, i0, scores, inverse, out); break;
    }
  }
}

void attendHeadAvx2(const Attn* a, int t, int h, float* scores) {
  if (a->q8) oneHead(a, 2, t, h, scores);
  else if (a->f16) oneHead(a, 1, t, h, scores);
  else oneHead(a, 0, t, h, scores);
}
