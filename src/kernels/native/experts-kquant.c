// experts.c's K-quant side: a layer's routed experts in GGML's q4_K and q6_K super-blocks (a Q4_K_M
// file's experts: gate and up q4_K, down q4_K or q6_K), read where they lie, never repacked, with
// the activations quantized as llama.cpp's CPU backend quantizes them for these weights (Q8_K:
// per 256 values, an f32 scale). Per super-block llama.cpp's AVX2 vec_dot_q4_K_q8_K /
// vec_dot_q6_K_q8_K lane for lane (vpmaddubsw, vpmaddwd with the 6-bit scales: exact integer sums
// per lane, widened to f32 and added by one FMA with d_x * d_w into eight lanes; q4_K's mins from
// the Q8_K sums into four more), the same float steps in the same order. A token's arithmetic is
// its own (the same bits alone or among others, whoever computes it). Compiled as experts.c
// (AVX2 + FMA + F16C, -ffp-contract=off).
//
//   q4_K (144 bytes): f16 d, f16 dmin, u8 scales[12] (6-bit sc, m per 32), u8 qs[128]: per 64
//        values, 32 bytes, low nibbles the first 32, high the next; w = d sc code - dmin m
//   q6_K (210 bytes): u8 ql[128], u8 qh[64], i8 scales[16] (per 16), f16 d; per 128 values ql 64
//        bytes, qh 32: w = d sc (code - 32), code = 4 bits of ql | 2 bits of qh << 4
#include <immintrin.h>

#include "dense.h"
#include "experts.h"

static inline float hsum8k(__m256 x) {
  __m128 r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

void expertsQuantizeQ8K(const float* x, int n, int8_t* q, float* d, int32_t* bsum) {
  for (int g = 0; g < n / 256; g++) {
    const float* src = x + 256 * g;
    const float amax = expertsAbsMax(src, 256);
    const float id = amax != 0 ? 127.0f / amax : 0.0f;
    d[g] = amax != 0 ? 1.0f / id : 0.0f;
    const __m256 idv = _mm256_set1_ps(id);
    for (int v = 0; v < 256; v += 16) {
      __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(src + v), idv));
      __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(src + v + 8), idv));
      __m256i s = _mm256_add_epi32(a, b);
      __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
      bsum[16 * g + v / 16] = _mm_cvtsi128_si32(s4);
      __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xD8);
      __m128i w = _mm_packs_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
      _mm_storeu_si128((__m128i*)(q + 256 * g + v), w);
    }
  }
}

// ggml's get_scale_min_k4: sub-block j's 6-bit scale and min.
static inline void scaleMin(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// q4_K: llama.cpp's AVX2 loop, float for float: per super-block acc += (d_x d_w) * sumi (eight lanes),
// and the mins in four lanes, accm += -(d_x dmin_w) * (m[2i] s[2i] + m[2i+1] s[2i+1]) (s: the
// Q8_K sums of 32), one FMA each; the result hsum(acc) + hsum(accm).
static inline __attribute__((always_inline)) void tileQ4K(const uint8_t* w, const XRow* x, int nsb, float* out,
                                                           const int NT) {
  const __m256i m4 = _mm256_set1_epi8(15);
  __m256 acc[TILE];
  __m128 accm[TILE];
  for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps(), accm[t] = _mm_setzero_ps();
  for (int s = 0; s < nsb; s++) {
    const uint8_t* blk = w + 144 * (size_t)s;
    const float dw = _cvtsh_ss(rd16(blk)), mw = _cvtsh_ss(rd16(blk + 2));
    uint8_t sc[8], mn[8];
    for (int j = 0; j < 8; j++) scaleMin(j, blk + 4, &sc[j], &mn[j]);
    const __m128i mins = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i*)mn));
    __m256i sumi[TILE];
    for (int t = 0; t < NT; t++) sumi[t] = _mm256_setzero_si256();
    for (int j = 0; j < 4; j++) {
      const __m256i raw = _mm256_loadu_si256((const __m256i*)(blk + 16 + 32 * j));
      const __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
      const __m256i sl = _mm256_set1_epi16(sc[2 * j]), sh = _mm256_set1_epi16(sc[2 * j + 1]);
      for (int t = 0; t < NT; t++) {
        const int8_t* qx = x[t].q + 256 * (size_t)s + 64 * j;
        __m256i a = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i*)qx)), sl);
        __m256i b = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i*)(qx + 32))), sh);
        sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(a, b));
      }
    }
    for (int t = 0; t < NT; t++) {
      // The sums of 32: the 16 sums of 16 paired (int16, as llama.cpp's hadd of its int16 bsums).
      const int32_t* bs = x[t].aux + 16 * (size_t)s;
      const __m256i b32 = _mm256_loadu_si256((const __m256i*)bs), b32h = _mm256_loadu_si256((const __m256i*)(bs + 8));
      const __m256i pairs = _mm256_hadd_epi32(b32, b32h);  // 0 1 8 9 | 4 5 12 13 (sub-blocks)
      const __m256i ordered = _mm256_permute4x64_epi64(pairs, 0xD8);
      const __m128i s16 = _mm_packs_epi32(_mm256_castsi256_si128(ordered), _mm256_extracti128_si256(ordered, 1));
      const __m128i prod = _mm_madd_epi16(mins, s16);
      const float dx = x[t].d[s];
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dx * dw), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
      accm[t] = _mm_fmadd_ps(_mm_set1_ps(-dx * mw), _mm_cvtepi32_ps(prod), accm[t]);
    }
  }
  for (int t = 0; t < NT; t++) {
    __m128 m = _mm_add_ps(accm[t], _mm_movehl_ps(accm[t], accm[t]));
    m = _mm_add_ss(m, _mm_movehdup_ps(m));
    out[t] = hsum8k(acc[t]) + _mm_cvtss_f32(m);
  }
}

// q6_K: llama.cpp's AVX2 loop, float for float: per 32 values the offset of 32 taken per lane
// (vpmaddubsw of 32 with the Q8_K values), then the scales; acc += (d_x d_w) * sumi.
static inline __attribute__((always_inline)) void tileQ6K(const uint8_t* w, const XRow* x, int nsb, float* out,
                                                           const int NT) {
  const __m256i m4 = _mm256_set1_epi8(15), m3 = _mm256_set1_epi8(3), mC = _mm256_set1_epi8(0x0C);
  const __m256i m30 = _mm256_set1_epi8(0x30), mC0 = _mm256_set1_epi8((char)0xC0), m32 = _mm256_set1_epi8(32);
  __m256 acc[TILE];
  for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
  for (int s = 0; s < nsb; s++) {
    const uint8_t* blk = w + 210 * (size_t)s;
    const int8_t* sc = (const int8_t*)(blk + 192);
    const float dw = _cvtsh_ss(rd16(blk + 208));
    __m256i sumi[TILE];
    for (int t = 0; t < NT; t++) sumi[t] = _mm256_setzero_si256();
    for (int n = 0; n < 2; n++) {
      const __m256i ql0 = _mm256_loadu_si256((const __m256i*)(blk + 64 * n));
      const __m256i ql1 = _mm256_loadu_si256((const __m256i*)(blk + 64 * n + 32));
      const __m256i h = _mm256_loadu_si256((const __m256i*)(blk + 128 + 32 * n));
      __m256i c[4];
      c[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16(_mm256_and_si256(h, m3), 4));
      c[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_slli_epi16(_mm256_and_si256(h, mC), 2));
      c[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(h, m30));
      c[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                             _mm256_srli_epi16(_mm256_and_si256(h, mC0), 2));
      for (int p = 0; p < 4; p++) {
        const int8_t* sp = sc + 8 * n + 2 * p;
        const __m256i scl = _mm256_set_m128i(_mm_set1_epi16(sp[1]), _mm_set1_epi16(sp[0]));
        for (int t = 0; t < NT; t++) {
          const __m256i q8 = _mm256_loadu_si256((const __m256i*)(x[t].q + 256 * (size_t)s + 128 * n + 32 * p));
          __m256i p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(c[p], q8), _mm256_maddubs_epi16(m32, q8));
          sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(p16, scl));
        }
      }
    }
    for (int t = 0; t < NT; t++)
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(x[t].d[s] * dw), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
  }
  for (int t = 0; t < NT; t++) out[t] = hsum8k(acc[t]);
}

void expertsDotTileK(int kind, const uint8_t* w, const XRow* x, int n, int nsb, float* out) {
#define CASES(TILEFN)                      \
  switch (n) {                             \
    case 1: TILEFN(w, x, nsb, out, 1); break; \
    case 2: TILEFN(w, x, nsb, out, 2); break; \
    case 3: TILEFN(w, x, nsb, out, 3); break; \
    default: TILEFN(w, x, nsb, out, 4); break; \
  }
  if (kind == K_Q4_K) {
    CASES(tileQ4K)
  } else {
    CASES(tileQ6K)
  }
#undef CASES
}
