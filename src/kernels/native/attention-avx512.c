// Tessera's native paged attention for AVX-512 (F, BW, VL) with F16C: attention.c's contract
// (its header), sixteen lanes. Compiled alone with its -m flags (scripts/build-native.mjs);
// attention.c calls it only when dense.c chose the AVX-512 variant. Never allocates. A KV head's
// query heads go together (attendGroupAvx512, at the end: each K / V row read once per group,
// sixteen dot products reduced at once), with each head's bits those of oneHead (one head alone):
// 1.3-1.7x faster on GQA shapes (m100's 12/4 prefill chunk of 256, f32 pool: 3.08 -> 2.20 ms CPU).
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "attention.h"

// exp(x) for 16 lanes: x = n ln2 + r, |r| <= ln2 / 2, e^r by its degree-6 Taylor-like minimax
// polynomial (Cephes' expf coefficients, ~1 ulp), times 2^n built in the exponent bits. Below
// -87.3 it gives 0 (the softmax's far tail), never a denormal; x is never above 0 here (scores
// minus their max), and a nan stays nan.
static inline __m512 exp512(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.3f);
  __mmask16 tiny = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  x = _mm512_min_ps(_mm512_set1_ps(88.3f), x);  // (min gives its second operand for a nan)
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  __m512 y = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
  return _mm512_mask_mov_ps(y, tiny, _mm512_setzero_ps());
}

// 16 (or `mask`'s) elements of a row of the pool as f32.
static inline __attribute__((always_inline)) __m512 loadKv(int f16, const void* row, int i, __mmask16 mask) {
  if (!f16) return _mm512_maskz_loadu_ps(mask, (const float*)row + i);
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, (const uint16_t*)row + i));
}

static inline __mmask16 tailMask(int left) { return left >= 16 ? 0xFFFF : (__mmask16)((1u << left) - 1); }

// As tailMask, 0 for left <= 0 (the second half of a short q8_0 block).
static inline __mmask16 tailMask0(int left) { return left <= 0 ? 0 : tailMask(left); }

// The f16 scale d at p (any alignment) as f32.
static inline float q8Scale(const uint8_t* p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// 16 (or `mask`'s) int8 values at p as f32.
static inline __m512 q8Load(const uint8_t* p, __mmask16 mask) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(mask, p)));
}

// out[i0, i0 + 16 NV) of one head += Σ_j scores[j - lo] V[j], in position order, its NV vectors
// in registers (NV a constant: a runtime count left them on the stack, ~3x slower), then scaled
// by `inverse`.
static inline __attribute__((always_inline)) void values(const Attn* a, int f16, int NV, int kvh, int lo, int n,
                                                          int i0, const float* scores, float inverse, float* out) {
  const int hd = a->headDim;
  const size_t rowBytes = (size_t)a->numKvHeads * hd * (f16 ? 2 : 4);
  __m512 acc[8];
  for (int v = 0; v < NV; v++) acc[v] = _mm512_setzero_ps();
  FOR_ROWS(a, 1, kvh, lo, n, {
    __m512 w = _mm512_set1_ps(scores[j - lo]);
    for (int v = 0; v < NV; v++) {
      int i = i0 + 16 * v;
      acc[v] = _mm512_fmadd_ps(w, loadKv(f16, row, i, tailMask(hd - i)), acc[v]);
    }
  })
  for (int v = 0; v < NV; v++) {
    int i = i0 + 16 * v;
    _mm512_mask_storeu_ps(out + i, tailMask(hd - i), _mm512_mul_ps(acc[v], _mm512_set1_ps(inverse)));
  }
}

// scores[j - lo] = scale * q . K[j] for j in [lo, n). NV: the head's vectors (hd / 16, rounded
// up) as a constant, q held in registers; 0: any headDim, q loaded as it goes.
static inline __attribute__((always_inline)) void qk(const Attn* a, int f16, int NV, int kvh, int lo, int n,
                                                      const float* q, float* scores) {
  const int hd = a->headDim;
  const size_t rowBytes = (size_t)a->numKvHeads * hd * (f16 ? 2 : 4);
  __m512 qv[8];
  for (int v = 0; v < NV; v++) qv[v] = _mm512_maskz_loadu_ps(tailMask(hd - 16 * v), q + 16 * v);
  FOR_ROWS(a, 0, kvh, lo, n, {
    __m512 acc = _mm512_setzero_ps();
    if (NV > 0) {
      for (int v = 0; v < NV; v++) acc = _mm512_fmadd_ps(qv[v], loadKv(f16, row, 16 * v, tailMask(hd - 16 * v)), acc);
    } else {
      for (int i = 0; i < hd; i += 16) {
        __mmask16 m = tailMask(hd - i);
        acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + i), loadKv(f16, row, i, m), acc);
      }
    }
    scores[j - lo] = _mm512_reduce_add_ps(acc) * a->scale;
  })
}

// q8_0: scores[j - lo] = scale * q . K[j]: per block, the f32 dot of q with the widened int8
// values, times the block's d. NB: the head's blocks as a constant (q held in registers), 0: any.
static inline __attribute__((always_inline)) void qkQ8(const Attn* a, int NB, int kvh, int lo, int n, const float* q,
                                                        float* scores) {
  const int hd = a->headDim;
  const size_t rowBytes = a->rowBytes;
  __m512 qv[16];
  for (int v = 0; v < 2 * NB; v++) qv[v] = _mm512_maskz_loadu_ps(tailMask0(hd - 16 * v), q + 16 * v);
  FOR_ROWS(a, 0, kvh, lo, n, {
    __m512 acc = _mm512_setzero_ps();
    if (NB > 0) {
      for (int b = 0; b < NB; b++) {
        const uint8_t* blk = row + 34 * b;
        const int left = hd - 32 * b;
        __m512 s = _mm512_mul_ps(qv[2 * b], q8Load(blk + 2, tailMask(left)));
        s = _mm512_fmadd_ps(qv[2 * b + 1], q8Load(blk + 18, tailMask0(left - 16)), s);
        acc = _mm512_fmadd_ps(_mm512_set1_ps(q8Scale(blk)), s, acc);
      }
    } else {
      for (int i = 0; i < hd; i += 32) {
        const uint8_t* blk = row + 34 * (i / 32);
        const __mmask16 m0 = tailMask(hd - i);
        const __mmask16 m1 = tailMask0(hd - i - 16);
        __m512 s = _mm512_mul_ps(_mm512_maskz_loadu_ps(m0, q + i), q8Load(blk + 2, m0));
        s = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m1, q + i + 16), q8Load(blk + 18, m1), s);
        acc = _mm512_fmadd_ps(_mm512_set1_ps(q8Scale(blk)), s, acc);
      }
    }
    scores[j - lo] = _mm512_reduce_add_ps(acc) * a->scale;
  })
}

// q8_0: out[i0, i0 + 16 NV) of one head += Σ_j (scores[j - lo] * d) qs[j], in position order,
// then scaled by `inverse`. i0 is a multiple of 128, so vector v lies in block (i0 + 16 v) / 32.
static inline __attribute__((always_inline)) void valuesQ8(const Attn* a, int NV, int kvh, int lo, int n, int i0,
                                                            const float* scores, float inverse, float* out) {
  const int hd = a->headDim;
  const size_t rowBytes = a->rowBytes;
  __m512 acc[8];
  for (int v = 0; v < NV; v++) acc[v] = _mm512_setzero_ps();
  FOR_ROWS(a, 1, kvh, lo, n, {
    const float w = scores[j - lo];
    for (int v = 0; v < NV; v += 2) {
      const int i = i0 + 16 * v;
      const uint8_t* blk = row + 34 * (i / 32);
      const __m512 wd = _mm512_set1_ps(w * q8Scale(blk));
      acc[v] = _mm512_fmadd_ps(wd, q8Load(blk + 2, tailMask(hd - i)), acc[v]);
      if (v + 1 < NV) acc[v + 1] = _mm512_fmadd_ps(wd, q8Load(blk + 18, tailMask0(hd - i - 16)), acc[v + 1]);
    }
  })
  for (int v = 0; v < NV; v++) {
    int i = i0 + 16 * v;
    _mm512_mask_storeu_ps(out + i, tailMask(hd - i), _mm512_mul_ps(acc[v], _mm512_set1_ps(inverse)));
  }
}

// scores[0, count) = exp(scores - their max), in place; returns 1 / their sum.
// h: the query head, for its sink logit (gpt-oss; none when a->sinks is NULL).
static inline float softmax(const Attn* a, int h, float* scores, int count) {
  // The largest score (a nan anywhere makes it nan, as Math.max would).
  __m512 max16 = _mm512_set1_ps(-INFINITY);
  __mmask16 nan = 0;
  for (int j = 0; j < count; j += 16) {
    __mmask16 m = tailMask(count - j);
    __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), m, scores + j);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    max16 = _mm512_max_ps(max16, v);
  }
  const float max = nan ? NAN : sinkMax(a, h, _mm512_reduce_max_ps(max16));
  __m512 mv = _mm512_set1_ps(max), sum16 = _mm512_setzero_ps();
  for (int j = 0; j < count; j += 16) {
    __mmask16 m = tailMask(count - j);
    __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, scores + j), mv));
    _mm512_mask_storeu_ps(scores + j, m, e);
    sum16 = _mm512_add_ps(sum16, _mm512_maskz_mov_ps(m, e));
  }
  return 1.0f / (_mm512_reduce_add_ps(sum16) + sinkTerm(a, h, max));
}

// out[t, h] for one (token, head): scores, softmax, the weighted sum of V, in position order.
static inline __attribute__((always_inline)) void oneHead(const Attn* a, int f16, int t, int h, float* scores) {
  const int hd = a->headDim, n = a->startPos + t + 1;
  const int lo = a->window > 0 && n - a->window > 0 ? n - a->window : 0;
  const int kvh = (int)((long)h * a->numKvHeads / a->numHeads);
  const float* q = a->q + ((size_t)t * a->numHeads + h) * hd;
  float* out = a->out + ((size_t)t * a->numHeads + h) * hd;
  if (f16 == 2) {
    switch ((hd + 31) / 32) {
      case 1: qkQ8(a, 1, kvh, lo, n, q, scores); break;
      case 2: qkQ8(a, 2, kvh, lo, n, q, scores); break;
      case 3: qkQ8(a, 3, kvh, lo, n, q, scores); break;
      case 4: qkQ8(a, 4, kvh, lo, n, q, scores); break;
      case 8: qkQ8(a, 8, kvh, lo, n, q, scores); break;
      default: qkQ8(a, 0, kvh, lo, n, q, scores); break;
    }
  } else switch ((hd + 15) / 16) {
    case 1: qk(a, f16, 1, kvh, lo, n, q, scores); break;
    case 2: qk(a, f16, 2, kvh, lo, n, q, scores); break;
    case 3: qk(a, f16, 3, kvh, lo, n, q, scores); break;
    case 4: qk(a, f16, 4, kvh, lo, n, q, scores); break;
    case 8: qk(a, f16, 8, kvh, lo, n, q, scores); break;
    default: qk(a, f16, 0, kvh, lo, n, q, scores); break;
  }
  const float inverse = softmax(a, h, scores, n - lo);
  // V: up to 8 vectors of the head's output at a time, over every position.
  for (int i0 = 0; i0 < hd && f16 == 2; i0 += 128) {
    switch ((hd - i0 + 15) / 16 < 8 ? (hd - i0 + 15) / 16 : 8) {
      case 1: valuesQ8(a, 1, kvh, lo, n, i0, scores, inverse, out); break;
      case 2: valuesQ8(a, 2, kvh, lo, n, i0, scores, inverse, out); break;
      case 3: valuesQ8(a, 3, kvh, lo, n, i0, scores, inverse, out); break;
      case 4: valuesQ8(a, 4, kvh, lo, n, i0, scores, inverse, out); break;
      case 5: valuesQ8(a, 5, kvh, lo, n, i0, scores, inverse, out); break;
      case 6: valuesQ8(a, 6, kvh, lo, n, i0, scores, inverse, out); break;
      case 7: valuesQ8(a, 7, kvh, lo, n, i0, scores, inverse, out); break;
      default: valuesQ8(a, 8, kvh, lo, n, i0, scores, inverse, out); break;
    }
  }
  for (int i0 = 0; i0 < hd && f16 != 2; i0 += 128) {
    switch ((hd - i0 + 15) / 16 < 8 ? (hd - i0 + 15) / 16 : 8) {
      case 1: values(a, f16, 1, kvh, lo, n, i0, scores, inverse, out); break;
      case 2: values(a, f16, 2, kvh, lo, n, i0, scores, inverse, out); break;
      case 3: values(a, f16, 3, kvh, lo, n, i0, scores, inverse, out); break;
      case 4: values(a, f16, 4, kvh, lo, n, i0, scores, inverse, out); break;
      case 5: values(a, f16, 5, kvh, lo, n, i0, scores, inverse, out); break;
      case 6: values(a, f16, 6, kvh, lo, n, i0, scores, inverse, out); break;
      case 7: values(a, f16, 7, kvh, lo, n, i0, scores, inverse, out); break;
      default: values(a, f16, 8, kvh, lo, n, i0, scores, inverse, out); break;
    }
  }
}

void attendHeadAvx512(const Attn* a, int t, int h, float* scores) {
  if (a->q8) oneHead(a, 2, t, h, scores);
  else if (a->f16) oneHead(a, 1, t, h, scores);
  else oneHead(a, 0, t, h, scores);
}

// ---------------------------------------------------------------- a KV head's group at once
// The same sums as oneHead, bit for bit, for every query head of KV head kvh's group at once:
// each K or V row is loaded (and, f16 / q8_0, widened) once for the group instead of once per
// head, and sixteen rows' dot products are reduced across lanes together (reduce16, the same
// pairing as _mm512_reduce_add_ps) instead of one at a time. Head dimensions up to 128.

// Sixteen horizontal sums at once: lane L is _mm512_reduce_add_ps(v[L]) bit for bit (that
// intrinsic adds lane i to lane i + 8, then i + 4, i + 2, i + 1; so does this, on all sixteen).
static inline __attribute__((always_inline)) __m512 reduce16(const float* raw) {
  __m512 w[8], x[4], y[2];
  // Slot s = 4r + c of the tree takes row 4c + r: the tree leaves row 4c + r's sum in lane 4c + r.
  for (int p = 0; p < 8; p++) {
    const int s0 = 2 * p, s1 = 2 * p + 1;
    const __m512 a = _mm512_loadu_ps(raw + 16 * (4 * (s0 % 4) + s0 / 4));
    const __m512 b = _mm512_loadu_ps(raw + 16 * (4 * (s1 % 4) + s1 / 4));
    w[p] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  for (int p = 0; p < 4; p++)
    x[p] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * p], w[2 * p + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(w[2 * p], w[2 * p + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  for (int p = 0; p < 2; p++)
    y[p] = _mm512_add_ps(_mm512_shuffle_ps(x[2 * p], x[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(x[2 * p], x[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm512_add_ps(_mm512_shuffle_ps(y[0], y[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(y[0], y[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// scores[g * ss + j - lo] = scale * q_g . K[j] for the G heads whose q rows start at q (hd apart):
// each head's per-row sum as qk's (or qkQ8's), kept unreduced in raw[g][16] until sixteen rows
// are in, then reduced together. kind: 0 f32, 1 f16, 2 q8_0; NV: vectors (f32 / f16) or blocks
// of 32 (q8_0) per head, a constant.
//
// qkGroupSpan: the rows [from, to) of that walk (lo <= from), its count of rows in raw and the first
// of them carried in *kio / *firstio from the span before, the partial sixteen reduced only when
// flush is set: spans in order give the whole walk's bits.
static inline __attribute__((always_inline)) void qkGroupSpan(const Attn* a, int kind, int NV, int G, int HDC, int kvh,
                                                               int lo, int from, int to, const float* q,
                                                               float* scores, size_t ss, float* raw, int* kio,
                                                               int* firstio, int flush) {
  const int hd = HDC ? HDC : a->headDim;
  // With G and the head dimension constants (HDC, G <= 8), the group's q rows are held in registers
  // where G x NV <= 16; loaded inside the loop, they were loaded again for every row (the stores to
  // raw may alias them).
  enum { QREGS = 16 };
  const int held = HDC != 0 && kind != 2 && G * NV <= QREGS;
  __m512 qv[QREGS];
  if (held)
    for (int g = 0; g < G; g++)
      for (int v = 0; v < NV; v++) qv[g * NV + v] = _mm512_loadu_ps(q + (size_t)g * hd + 16 * v);
  const size_t rowBytes = a->rowBytes;
  const __m512 scale = _mm512_set1_ps(a->scale);
  int k = *kio, first = *firstio;
  FOR_ROWS(a, 0, kvh, from, to, {
    if (kind == 2) {
      __m512 lo16[8];
      __m512 hi16[8];
      float d[8];
      for (int b = 0; b < NV; b++) {
        const uint8_t* blk = row + 34 * b;
        lo16[b] = q8Load(blk + 2, tailMask(hd - 32 * b));
        hi16[b] = q8Load(blk + 18, tailMask0(hd - 32 * b - 16));
        d[b] = q8Scale(blk);
      }
      for (int g = 0; g < G; g++) {
        const float* qg = q + (size_t)g * hd;
        __m512 acc = _mm512_setzero_ps();
        for (int b = 0; b < NV; b++) {
          __m512 s = _mm512_mul_ps(_mm512_maskz_loadu_ps(tailMask(hd - 32 * b), qg + 32 * b), lo16[b]);
          s = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tailMask0(hd - 32 * b - 16), qg + 32 * b + 16), hi16[b], s);
          acc = _mm512_fmadd_ps(_mm512_set1_ps(d[b]), s, acc);
        }
        _mm512_storeu_ps(raw + 256 * g + 16 * k, acc);
      }
    } else {
      __m512 kv[8];
      for (int v = 0; v < NV; v++) kv[v] = loadKv(kind, row, 16 * v, tailMask(hd - 16 * v));
      for (int g = 0; g < G; g++) {
        const float* qg = q + (size_t)g * hd;
        __m512 acc = _mm512_setzero_ps();
        for (int v = 0; v < NV; v++)
          acc = _mm512_fmadd_ps(held ? qv[g * NV + v] : _mm512_maskz_loadu_ps(tailMask(hd - 16 * v), qg + 16 * v), kv[v], acc);
        _mm512_storeu_ps(raw + 256 * g + 16 * k, acc);
      }
    }
    if (++k == 16) {
      for (int g = 0; g < G; g++) _mm512_storeu_ps(scores + g * ss + (first - lo), _mm512_mul_ps(reduce16(raw + 256 * g), scale));
      k = 0;
      first = j + 1;
    }
  })
  if (flush && k > 0)
    for (int g = 0; g < G; g++)
      _mm512_mask_storeu_ps(scores + g * ss + (first - lo), tailMask(k), _mm512_mul_ps(reduce16(raw + 256 * g), scale));
  *kio = k;
  *firstio = first;
}

static inline __attribute__((always_inline)) void qkGroup(const Attn* a, int kind, int NV, int G, int HDC, int kvh,
                                                           int lo, int n, const float* q, float* scores, size_t ss,
                                                           float* raw) {
  int k = 0, first = lo;
  qkGroupSpan(a, kind, NV, G, HDC, kvh, lo, lo, n, q, scores, ss, raw, &k, &first, 1);
}

// out_g[i0, i0 + 16 NV) += Σ_j scores_g[j - lo] V[j] for the HG heads from head g0 of the group
// (as values / valuesQ8 for each), each V row loaded once for all of them; then each scaled by
// its inverse. HG x NV <= 24 accumulators (GCC keeps this array on the stack; valuesNamed, below,
// is the common shapes' path without that).
static inline __attribute__((always_inline)) void valuesGroup(const Attn* a, int kind, int NV, int HG, int kvh, int lo,
                                                               int n, int i0, const float* scores, size_t ss,
                                                               const float* inverse, float* out) {
  const int hd = a->headDim;
  const size_t rowBytes = a->rowBytes;
  __m512 acc[4][8];
  for (int g = 0; g < HG; g++)
    for (int v = 0; v < NV; v++) acc[g][v] = _mm512_setzero_ps();
  FOR_ROWS(a, 1, kvh, lo, n, {
    if (kind == 2) {
      for (int v = 0; v < NV; v += 2) {
        const int i = i0 + 16 * v;
        const uint8_t* blk = row + 34 * (i / 32);
        const float d = q8Scale(blk);
        const __m512 x0 = q8Load(blk + 2, tailMask(hd - i));
        const __m512 x1 = v + 1 < NV ? q8Load(blk + 18, tailMask0(hd - i - 16)) : _mm512_setzero_ps();
        for (int g = 0; g < HG; g++) {
          const __m512 wd = _mm512_set1_ps(scores[g * ss + (j - lo)] * d);
          acc[g][v] = _mm512_fmadd_ps(wd, x0, acc[g][v]);
          if (v + 1 < NV) acc[g][v + 1] = _mm512_fmadd_ps(wd, x1, acc[g][v + 1]);
        }
      }
    } else {
      __m512 x[8];
      for (int v = 0; v < NV; v++) x[v] = loadKv(kind, row, i0 + 16 * v, tailMask(hd - i0 - 16 * v));
      for (int g = 0; g < HG; g++) {
        const __m512 w = _mm512_set1_ps(scores[g * ss + (j - lo)]);
        for (int v = 0; v < NV; v++) acc[g][v] = _mm512_fmadd_ps(w, x[v], acc[g][v]);
      }
    }
  })
  for (int g = 0; g < HG; g++)
    for (int v = 0; v < NV; v++) {
      const int i = i0 + 16 * v;
      _mm512_mask_storeu_ps(out + (size_t)g * hd + i, tailMask(hd - i), _mm512_mul_ps(acc[g][v], _mm512_set1_ps(inverse[g])));
    }
}

// valuesGroup for HG <= 4 heads of NV = 4 or 8 full vectors (kind 0 or 1; HG x NV <= 16) with
// its accumulators as named variables: as an array, GCC kept them on the stack, a load and a
// store around every multiply-add (the values pass was half of a batch-1 decode's attention).
// The same multiply-adds in the same order, so the same bits. Names past HG or NV are never used.
#define VN_EACH_V(M, g) M(g, 0) M(g, 1) M(g, 2) M(g, 3) M(g, 4) M(g, 5) M(g, 6) M(g, 7)
#define VN_EACH(M) VN_EACH_V(M, 0) VN_EACH_V(M, 1) VN_EACH_V(M, 2) VN_EACH_V(M, 3)
#define VN_ZERO(g, v) __m512 a##g##v = _mm512_setzero_ps();
#define VN_LOAD(v) const __m512 x##v = v < NV ? loadKv(kind, row, 16 * v, 0xFFFF) : _mm512_setzero_ps();
#define VN_FMA(g, v) \
  if (g < HG && v < NV) a##g##v = _mm512_fmadd_ps(_mm512_set1_ps(scores[g * ss + (j - lo)]), x##v, a##g##v);
#define VN_OUT(g, v) \
  if (g < HG && v < NV) _mm512_storeu_ps(out + (size_t)g * hd + 16 * v, _mm512_mul_ps(a##g##v, _mm512_set1_ps(inverse[g])));
// span (a constant) 1: the rows [from, to) only, the accumulators taken from sums (HG x hd floats,
// head g's at g hd) and put back there unscaled, so that spans in order give the whole pass's
// bits; 0: the rows [from, to) from zero, scaled by inverse into out.
#define VN_IN(g, v) \
  if (span && g < HG && v < NV) a##g##v = _mm512_loadu_ps(sums + (size_t)g * hd + 16 * v);
#define VN_KEEP(g, v) \
  if (g < HG && v < NV) _mm512_storeu_ps(sums + (size_t)g * hd + 16 * v, a##g##v);
static inline __attribute__((always_inline)) void valuesNamed(const Attn* a, int kind, int NV, int HG, int kvh, int lo,
                                                               int from, int to, const float* scores, size_t ss,
                                                               const float* inverse, float* out, int span,
                                                               float* sums) {
  const size_t rowBytes = a->rowBytes;
  const int hd = 16 * NV;
  VN_EACH(VN_ZERO)
  VN_EACH(VN_IN)
  FOR_ROWS(a, 1, kvh, from, to, {
    VN_LOAD(0) VN_LOAD(1) VN_LOAD(2) VN_LOAD(3) VN_LOAD(4) VN_LOAD(5) VN_LOAD(6) VN_LOAD(7)
    VN_EACH(VN_FMA)
  })
  if (span) {
    VN_EACH(VN_KEEP)
  } else {
    VN_EACH(VN_OUT)
  }
}

// valuesGroup's q8_0 pass (kind 2) the same way: per block of 32 its scale d, the two halves'
// values, and per head one weight scores[j] * d for both halves' multiply-adds.
#define VQ_BLOCK(b, v0, v1)                                                                 \
  const float d##b = v0 < NV ? q8Scale(row + 34 * b) : 0.0f;                                \
  const __m512 x##v0 = v0 < NV ? q8Load(row + 34 * b + 2, 0xFFFF) : _mm512_setzero_ps();    \
  const __m512 x##v1 = v1 < NV ? q8Load(row + 34 * b + 18, 0xFFFF) : _mm512_setzero_ps();
#define VQ_FMA(g, b, v0, v1)                                                     \
  if (g < HG && v0 < NV) {                                                       \
    const __m512 wd = _mm512_set1_ps(scores[g * ss + (j - lo)] * d##b);          \
    a##g##v0 = _mm512_fmadd_ps(wd, x##v0, a##g##v0);                             \
    a##g##v1 = _mm512_fmadd_ps(wd, x##v1, a##g##v1);                             \
  }
#define VQ_EACH_B(g) VQ_FMA(g, 0, 0, 1) VQ_FMA(g, 1, 2, 3) VQ_FMA(g, 2, 4, 5) VQ_FMA(g, 3, 6, 7)
static inline __attribute__((always_inline)) void valuesNamedQ8(const Attn* a, int NV, int HG, int kvh, int lo, int from,
                                                                 int to, const float* scores, size_t ss,
                                                                 const float* inverse, float* out, int span,
                                                                 float* sums) {
  const size_t rowBytes = a->rowBytes;
  const int hd = 16 * NV;
  VN_EACH(VN_ZERO)
  VN_EACH(VN_IN)
  FOR_ROWS(a, 1, kvh, from, to, {
    VQ_BLOCK(0, 0, 1) VQ_BLOCK(1, 2, 3) VQ_BLOCK(2, 4, 5) VQ_BLOCK(3, 6, 7)
    VQ_EACH_B(0) VQ_EACH_B(1) VQ_EACH_B(2) VQ_EACH_B(3)
  })
  if (span) {
    VN_EACH(VN_KEEP)
  } else {
    VN_EACH(VN_OUT)
  }
}

#define VALUES_HG(kind, NV, HG, ...)                                  \
  switch (HG) {                                                      \
    case 1: valuesGroup(a, kind, NV, 1, __VA_ARGS__); break;         \
    case 2: valuesGroup(a, kind, NV, 2, __VA_ARGS__); break;         \
    case 3: valuesGroup(a, kind, NV, 3, __VA_ARGS__); break;         \
    default: valuesGroup(a, kind, NV, 4, __VA_ARGS__); break;        \
  }

// Heads [0, G) of the group (their q and out rows hd apart), head dimension <= 128.
// HDC: the head dimension as a constant (16 NV), or 0 for a->headDim.
static inline __attribute__((always_inline)) void groupKind(const Attn* a, int kind, int NV, int HDC, int t, int kvh,
                                                             int h0, int G, float* scratch) {
  const int hd = HDC ? HDC : a->headDim, n = a->startPos + t + 1;
  const int lo = a->window > 0 && n - a->window > 0 ? n - a->window : 0;
  const int count = n - lo;
  const size_t ss = (size_t)(count + 15) / 16 * 16;
  float* raw = scratch;           // G x 16 x 16
  float* scores = raw + 256 * G;  // G x ss
  float inverse[GROUP_MAX];
  const float* q = a->q + ((size_t)t * a->numHeads + h0) * hd;
  float* out = a->out + ((size_t)t * a->numHeads + h0) * hd;
  // K: NV vectors of 16 (f32 / f16) or blocks of 32 (q8_0) per head.
  const int kv = kind == 2 ? (NV + 1) / 2 : NV;
  switch (kv) {
    case 1: qkGroup(a, kind, 1, G, HDC, kvh, lo, n, q, scores, ss, raw); break;
    case 2: qkGroup(a, kind, 2, G, HDC, kvh, lo, n, q, scores, ss, raw); break;
    case 3: qkGroup(a, kind, 3, G, HDC, kvh, lo, n, q, scores, ss, raw); break;
    case 4: qkGroup(a, kind, 4, G, HDC, kvh, lo, n, q, scores, ss, raw); break;
    case 5: qkGroup(a, kind, 5, G, HDC, kvh, lo, n, q, scores, ss, raw); break;
    case 6: qkGroup(a, kind, 6, G, HDC, kvh, lo, n, q, scores, ss, raw); break;
    case 7: qkGroup(a, kind, 7, G, HDC, kvh, lo, n, q, scores, ss, raw); break;
    default: qkGroup(a, kind, 8, G, HDC, kvh, lo, n, q, scores, ss, raw); break;
  }
  for (int g = 0; g < G; g++) inverse[g] = softmax(a, h0 + g, scores + g * ss, count);
  if (HDC == 64 || HDC == 128) {
    const int maxNamed = HDC == 64 ? 4 : 2;  // heads a pass: HG x NV <= 16 accumulators
    for (int g0 = 0; g0 < G; g0 += maxNamed) {
      const int hg = G - g0 < maxNamed ? G - g0 : maxNamed;
      const float* sg = scores + g0 * ss;
      float* og = out + (size_t)g0 * hd;
      switch (hg) {
#define VALUES_NAMED(HG)                                                                             \
  if (kind == 2) valuesNamedQ8(a, HDC / 16, HG, kvh, lo, lo, n, sg, ss, inverse + g0, og, 0, NULL);       \
  else valuesNamed(a, kind, HDC / 16, HG, kvh, lo, lo, n, sg, ss, inverse + g0, og, 0, NULL);
        case 1: VALUES_NAMED(1) break;
        case 2: VALUES_NAMED(2) break;
        case 3: VALUES_NAMED(3) break;
        default: VALUES_NAMED(4) break;
      }
    }
    return;
  }
  const int maxHG = 24 / NV < 4 ? 24 / NV : 4;
  for (int g0 = 0; g0 < G; g0 += maxHG) {
    const int hg = G - g0 < maxHG ? G - g0 : maxHG;
    VALUES_HG(kind, NV, hg, kvh, lo, n, 0, scores + g0 * ss, ss, inverse + g0, out + (size_t)g0 * hd)
  }
}

#define GROUP_NV(kind)                                                         \
  switch (NV) {                                                                \
    case 1: groupKind(a, kind, 1, 0, t, kvh, h0, G, scratch); break;           \
    case 2: groupKind(a, kind, 2, 0, t, kvh, h0, G, scratch); break;           \
    case 3: groupKind(a, kind, 3, 0, t, kvh, h0, G, scratch); break;           \
    case 4: groupKind(a, kind, 4, 0, t, kvh, h0, G, scratch); break;           \
    case 5: groupKind(a, kind, 5, 0, t, kvh, h0, G, scratch); break;           \
    case 6: groupKind(a, kind, 6, 0, t, kvh, h0, G, scratch); break;           \
    case 7: groupKind(a, kind, 7, 0, t, kvh, h0, G, scratch); break;           \
    default: groupKind(a, kind, 8, 0, t, kvh, h0, G, scratch); break;          \
  }

// The common shapes, (head dimension, group size), that run with both as constants: full vectors
// without masks, the group's loops unrolled, q held in registers and the values pass's
// accumulators named. The same operations in the same order as the general path, so the same
// bits. Both dispatchers below (one KV head; a run of them) take exactly these.
#define FIXED_SHAPES(X) X(64, 4) X(64, 2) X(64, 8) X(64, 3) X(64, 6) X(128, 4) X(128, 2) X(128, 8)

// One KV head's group on a fixed shape; 0 where the shape is not one of them.
#define GROUP_FIXED(HD, GC)                                                    \
  if (hd == HD && G == GC) {                                                   \
    groupKind(a, kind, HD / 16, HD, t, kvh, h0, GC, scratch);                  \
    return 1;                                                                  \
  }
static inline __attribute__((always_inline)) int groupFixed(const Attn* a, int kind, int t, int kvh, int h0, int G,
                                                             float* scratch) {
  const int hd = a->headDim;
  FIXED_SHAPES(GROUP_FIXED)
  return 0;
}

void attendGroupAvx512(const Attn* a, int t, int kvh, float* scratch) {
  int h0, h1;
  groupHeads(a, kvh, &h0, &h1);
  const int NV = (a->headDim + 15) / 16, G = h1 - h0;
  if (G == 1 || a->headDim > 128 || G > GROUP_MAX) {  // one head: oneHead's own reduction is as fast
    for (int h = h0; h < h1; h++) attendHeadAvx512(a, t, h, scratch);
    return;
  }
  if (a->q8) {
    if (!groupFixed(a, 2, t, kvh, h0, G, scratch)) GROUP_NV(2)
  } else if (a->f16) {
    if (!groupFixed(a, 1, t, kvh, h0, G, scratch)) GROUP_NV(1)
  } else if (!groupFixed(a, 0, t, kvh, h0, G, scratch)) GROUP_NV(0)
}

// ---------------------------------------------------------------- a run of KV heads, page by page
// KV heads [kvh0, kvh1) of token t (a thread's run of items), each head's group as groupKind
// computes it, but walked together a page at a time: one page's K rows for every head of the run,
// then the next page's (and then the same for V). A head's rows are 256 bytes every 2 KiB of a
// slot's row (8 KV heads of 64 f32): one head alone reads them at a stride the hardware prefetch
// does not follow, and batch-1 decode's attention ran at a third of the machine's bandwidth; a
// run reads its heads' pieces of each slot's row together. Every head's sums are the same
// operations in the same order (qkGroupSpan and valuesNamed over the spans in order, the
// accumulators kept in scratch between spans, exact), so the same bits as groupKind for each.
static inline __attribute__((always_inline)) void groupsKind(const Attn* a, int kind, int HDC, int GC, int t, int kvh0,
                                                              int kvh1, float* scratch) {
  const int NV = HDC / 16, hd = HDC, n = a->startPos + t + 1, lo = 0, ps = a->pageSize;
  const int kvq = kind == 2 ? (NV + 1) / 2 : NV;  // qkGroupSpan's NV: blocks of 32 for q8_0
  const int maxNamed = HDC == 64 ? 4 : 2;          // heads a values pass: HG x NV <= 16
  const size_t ss = (size_t)(n + 15) / 16 * 16;
  const size_t per = (size_t)GC * (256 + ss + hd);  // a head's raw [GC][256], scores [GC][ss], sums [GC][hd]
  const int K = kvh1 - kvh0;
  int kst[GROUP_RUN_MAX], fst[GROUP_RUN_MAX];
  float inverse[GROUP_RUN_MAX * 8];
  for (int k = 0; k < K; k++) kst[k] = 0, fst[k] = lo;
  for (int p0 = lo; p0 < n;) {
    const int p1 = (p0 / ps + 1) * ps < n ? (p0 / ps + 1) * ps : n;
    for (int k = 0; k < K; k++) {
      float* raw = scratch + k * per;
      const float* q = a->q + ((size_t)t * a->numHeads + (size_t)(kvh0 + k) * GC) * hd;
      qkGroupSpan(a, kind, kvq, GC, HDC, kvh0 + k, lo, p0, p1, q, raw + 256 * GC, ss, raw, &kst[k], &fst[k], p1 == n);
    }
    p0 = p1;
  }
  for (int k = 0; k < K; k++) {
    float* scores = scratch + k * per + 256 * GC;
    for (int g = 0; g < GC; g++) inverse[k * 8 + g] = softmax(a, (kvh0 + k) * GC + g, scores + g * ss, n - lo);
    memset(scores + GC * ss, 0, (size_t)GC * hd * sizeof(float));
  }
  for (int p0 = lo; p0 < n;) {
    const int p1 = (p0 / ps + 1) * ps < n ? (p0 / ps + 1) * ps : n;
    for (int k = 0; k < K; k++) {
      const float* scores = scratch + k * per + 256 * GC;
      float* sums = scratch + k * per + 256 * GC + GC * ss;
      for (int g0 = 0; g0 < GC; g0 += maxNamed) {
        const int hg = GC - g0 < maxNamed ? GC - g0 : maxNamed;
        const float* sg = scores + g0 * ss;
        float* sumg = sums + (size_t)g0 * hd;
        switch (hg) {
#define VALUES_SPAN(HG)                                                                          \
  if (kind == 2) valuesNamedQ8(a, NV, HG, kvh0 + k, lo, p0, p1, sg, ss, NULL, NULL, 1, sumg);        \
  else valuesNamed(a, kind, NV, HG, kvh0 + k, lo, p0, p1, sg, ss, NULL, NULL, 1, sumg);
          case 1: VALUES_SPAN(1) break;
          case 2: VALUES_SPAN(2) break;
          case 3: VALUES_SPAN(3) break;
          default: VALUES_SPAN(4) break;
        }
      }
    }
    p0 = p1;
  }
  // The outputs: each head's sums times its inverse, as valuesNamed's VN_OUT writes them.
  for (int k = 0; k < K; k++) {
    const float* sums = scratch + k * per + 256 * GC + GC * ss;
    float* out = a->out + ((size_t)t * a->numHeads + (size_t)(kvh0 + k) * GC) * hd;
    for (int g = 0; g < GC; g++)
      for (int v = 0; v < NV; v++)
        _mm512_storeu_ps(out + (size_t)g * hd + 16 * v,
                         _mm512_mul_ps(_mm512_loadu_ps(sums + (size_t)g * hd + 16 * v), _mm512_set1_ps(inverse[k * 8 + g])));
  }
}

#define GROUPS_FIXED(HD, GC)                                   \
  if (hd == HD && G == GC) {                                   \
    groupsKind(a, kind, HD, GC, t, kvh0, kvh1, scratch);       \
    return 1;                                                  \
  }
static inline __attribute__((always_inline)) int groupsFixed(const Attn* a, int kind, int t, int kvh0, int kvh1, int G,
                                                              float* scratch) {
  const int hd = a->headDim;
  FIXED_SHAPES(GROUPS_FIXED)
  return 0;
}

int attendGroupsAvx512(const Attn* a, int t, int kvh0, int kvh1, float* scratch) {
  const int G = a->numHeads / a->numKvHeads;
  if (kvh1 - kvh0 < 2 || kvh1 - kvh0 > GROUP_RUN_MAX || a->window > 0 || a->numHeads != G * a->numKvHeads)
    return 0;
  const int kind = a->q8 ? 2 : a->f16 ? 1 : 0;
  switch (kind) {
    case 2: return groupsFixed(a, 2, t, kvh0, kvh1, G, scratch);
    case 1: return groupsFixed(a, 1, t, kvh0, kvh1, G, scratch);
    default: return groupsFixed(a, 0, t, kvh0, kvh1, G, scratch);
  }
}
