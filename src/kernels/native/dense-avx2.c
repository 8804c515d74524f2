// Tessera's dense kernels for AVX2 with FMA and F16C (Haswell and later, AMD Zen 1-3): dense.c's
// layout and arithmetic (its header) with 8 lanes where dense-avx512.c has 16. Each 64-byte code
// vector V_j is read as two halves (16-groups 0..7, then 8..15); its u8 x s8 products come from
// vpmaddubsw (pairs into int16, summed over V0..V3 where that cannot overflow: 4-bit codes x 127
// x 8 < 2^15; 5-bit likewise; 6-bit in pairs) then vpmaddwd by ones (int16 pairs into the
// 16-group's int32 lane), exact integers as vpdpbusd's. q8_0 codes (u8 = q + 128) would
// saturate vpmaddubsw, so they are made signed again and multiplied as llama.cpp's AVX2 path
// does (|w| x sign(x, w)): the same integer sum with no offset term. Activations are quantized
// exactly as in dense-avx512.c (llama.cpp's Q8_0 / Q8_K, round to nearest even), so every
// block's integer sum is the same; only the float sums' order differs (8 + 8 lanes).
// Compiled alone with -mavx2 -mfma -mf16c (scripts/build-native.mjs); dense.c calls it only on a
// CPU with all three. Never allocates.
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "dense.h"

#define MB_MAX 4

static inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// 16 int32 (a: values 0..7, b: 8..15) saturated to int8, in order.
static inline __m128i packTo8(__m256i a, __m256i b) {
  __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xD8);
  return _mm_packs_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
}

// As dense-avx512.c's quantizeNatural (q in element order), 8 lanes at a time; a group's tail is
// read through a zero-padded copy.
static void quantizeNatural(int kind, const float* x, int cols, int kpad, int8_t* q, float* dx16, float* c16) {
  const int group = kind >= K_Q4_K ? 256 : 32;
  float pad[256];
  const __m256 absMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int g = 0; g < kpad / group; g++) {
    int at = group * g, n = cols - at;
    if (n <= 0) {
      memset(q + at, 0, group);
      for (int i = 0; i < group / 16; i++) dx16[at / 16 + i] = c16[at / 16 + i] = 0;
      continue;
    }
    const float* src = x + at;
    if (n < group) {
      memcpy(pad, src, (size_t)n * 4);
      memset(pad + n, 0, (size_t)(group - n) * 4);
      src = pad;
    }
    __m256 amaxv = _mm256_setzero_ps();
    for (int v = 0; v < group; v += 8) amaxv = _mm256_max_ps(amaxv, _mm256_and_ps(_mm256_loadu_ps(src + v), absMask));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amaxv), _mm256_extractf128_ps(amaxv, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4))), id, d;
    if (group == 32) {
      d = _cvtsh_ss(_cvtss_sh(amax / 127.0f, _MM_FROUND_TO_NEAREST_INT));
      id = amax != 0 ? 127.0f / amax : 0.0f;
    } else {
      id = amax != 0 ? 127.0f / amax : 0.0f;
      d = amax != 0 ? 1.0f / id : 0.0f;
    }
    const __m256 idv = _mm256_set1_ps(id);
    for (int v = 0; v < group; v += 16) {
      __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(src + v), idv));
      __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(src + v + 8), idv));
      _mm_storeu_si128((__m128i*)(q + at + v), packTo8(a, b));
      __m256i s8 = _mm256_add_epi32(a, b);
      __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
      dx16[(at + v) / 16] = d;
      c16[(at + v) / 16] = d * (float)_mm_cvtsi128_si32(s4);
    }
  }
}

static void quantizeRow(int kind, const float* x, int cols, int kpad, int8_t* q, float* dx16, float* c16) {
  quantizeNatural(kind, x, cols, kpad, q, dx16, c16);
  // Word w = 4k + j of a super-block (elements 16k + 4j ..) moves to word 16j + k.
  for (int s = 0; s < kpad / QK; s++) {
    int32_t in[64], *words = (int32_t*)(q + QK * s);
    memcpy(in, words, sizeof in);
    for (int j = 0; j < 4; j++)
      for (int k = 0; k < 16; k++) words[16 * j + k] = in[4 * k + j];
  }
}

// Weight-side factors of one super-block for the 16-groups 8h .. 8h + 7: S (the code's scale), T (offset).
static inline void superFactors(int kind, const uint8_t* h, int half, __m256* S, __m256* T) {
  const __m256i dup2 = half ? _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7) : _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
  if (kind == K_Q4_0 || kind == K_Q8_0) {
    *S = _mm256_permutevar8x32_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)h)), dup2);
    *T = kind == K_Q4_0 ? _mm256_mul_ps(*S, _mm256_set1_ps(8.0f)) : _mm256_setzero_ps();  // q8_0: signed products
  } else if (kind == K_Q4_K || kind == K_Q5_K) {
    float d = _cvtsh_ss(rd16(h)), dmin = _cvtsh_ss(rd16(h + 2));
    __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(h + 4))));
    __m256 mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(h + 12))));
    *S = _mm256_mul_ps(_mm256_permutevar8x32_ps(sc, dup2), _mm256_set1_ps(d));
    *T = _mm256_mul_ps(_mm256_permutevar8x32_ps(mn, dup2), _mm256_set1_ps(dmin));
  } else {  // q6_K
    float d = _cvtsh_ss(rd16(h));
    __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(h + 2 + 8 * half))));
    *S = _mm256_mul_ps(sc, _mm256_set1_ps(d));
    *T = _mm256_mul_ps(*S, _mm256_set1_ps(32.0f));
  }
}

// 0xFF in byte i where bit i of m is set.
static inline __m256i bitsToBytes(uint32_t m) {
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                          3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
  __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)m), spread);
  return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

// Rows [r0, r1) of a block weight for MB x rows at once (x quantized in q/dx16/c16 at stride kpad).
static inline __attribute__((always_inline)) void blockRows(int kind, int MB, const uint8_t* w, int nsb, int kpad,
                                                             int r0, int r1, const int8_t* q, const float* dx16,
                                                             const float* c16, float* out, int outStride) {
  const int sbBytes = superBytes(kind);
  const int hdr = kind == K_Q4_0 || kind == K_Q8_0 ? 16 : kind == K_Q6_K ? 18 : 20;
  const __m256i nib = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
  for (int r = r0; r < r1; r++) {
    const uint8_t* row = w + (size_t)r * nsb * sbBytes;
    __m256 acc[MB_MAX][2];
    for (int i = 0; i < MB; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    for (int s = 0; s < nsb; s++) {
      const uint8_t* sb = row + (size_t)s * sbBytes;
      const uint8_t* codes = sb + hdr;
      for (int h = 0; h < 2; h++) {
        __m256 S, T;
        superFactors(kind, sb, h, &S, &T);
        __m256i v0, v1, v2, v3;
        if (kind == K_Q8_0) {  // signed again: code ^ 0x80 = the int8 q
          const __m256i flip = _mm256_set1_epi8((char)0x80);
          v0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i*)(codes + 32 * h)), flip);
          v1 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i*)(codes + 64 + 32 * h)), flip);
          v2 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i*)(codes + 128 + 32 * h)), flip);
          v3 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i*)(codes + 192 + 32 * h)), flip);
        } else {
          __m256i a = _mm256_loadu_si256((const __m256i*)(codes + 32 * h));
          __m256i b = _mm256_loadu_si256((const __m256i*)(codes + 64 + 32 * h));
          v0 = _mm256_and_si256(a, nib);
          v1 = _mm256_and_si256(_mm256_srli_epi16(a, 4), nib);
          v2 = _mm256_and_si256(b, nib);
          v3 = _mm256_and_si256(_mm256_srli_epi16(b, 4), nib);
          if (kind == K_Q5_K || kind == K_Q6_K) {
            uint32_t mk[16];
            memcpy(mk, codes + 128, kind == K_Q5_K ? 32 : 64);
            const __m256i b4 = _mm256_set1_epi8(16), b5 = _mm256_set1_epi8(32);
            v0 = _mm256_or_si256(v0, _mm256_and_si256(bitsToBytes(mk[0 + h]), b4));
            v1 = _mm256_or_si256(v1, _mm256_and_si256(bitsToBytes(mk[2 + h]), b4));
            v2 = _mm256_or_si256(v2, _mm256_and_si256(bitsToBytes(mk[4 + h]), b4));
            v3 = _mm256_or_si256(v3, _mm256_and_si256(bitsToBytes(mk[6 + h]), b4));
            if (kind == K_Q6_K) {
              v0 = _mm256_or_si256(v0, _mm256_and_si256(bitsToBytes(mk[8 + h]), b5));
              v1 = _mm256_or_si256(v1, _mm256_and_si256(bitsToBytes(mk[10 + h]), b5));
              v2 = _mm256_or_si256(v2, _mm256_and_si256(bitsToBytes(mk[12 + h]), b5));
              v3 = _mm256_or_si256(v3, _mm256_and_si256(bitsToBytes(mk[14 + h]), b5));
            }
          }
        }
        for (int i = 0; i < MB; i++) {
          const int8_t* xq = q + (size_t)i * kpad + 256 * s + 32 * h;
          const float* d = dx16 + (size_t)i * (kpad / 16) + 16 * s + 8 * h;
          const float* c = c16 + (size_t)i * (kpad / 16) + 16 * s + 8 * h;
          __m256i x0 = _mm256_loadu_si256((const __m256i*)xq), x1 = _mm256_loadu_si256((const __m256i*)(xq + 64));
          __m256i x2 = _mm256_loadu_si256((const __m256i*)(xq + 128)), x3 = _mm256_loadu_si256((const __m256i*)(xq + 192));
          __m256i dot;
          if (kind == K_Q8_0) {
            dot = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(v0, v0), _mm256_sign_epi8(x0, v0)), ones);
            dot = _mm256_add_epi32(dot, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(v1, v1), _mm256_sign_epi8(x1, v1)), ones));
            dot = _mm256_add_epi32(dot, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(v2, v2), _mm256_sign_epi8(x2, v2)), ones));
            dot = _mm256_add_epi32(dot, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(v3, v3), _mm256_sign_epi8(x3, v3)), ones));
          } else if (kind == K_Q6_K) {
            __m256i p01 = _mm256_add_epi16(_mm256_maddubs_epi16(v0, x0), _mm256_maddubs_epi16(v1, x1));
            __m256i p23 = _mm256_add_epi16(_mm256_maddubs_epi16(v2, x2), _mm256_maddubs_epi16(v3, x3));
            dot = _mm256_add_epi32(_mm256_madd_epi16(p01, ones), _mm256_madd_epi16(p23, ones));
          } else {
            __m256i p = _mm256_add_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(v0, x0), _mm256_maddubs_epi16(v1, x1)),
                                         _mm256_add_epi16(_mm256_maddubs_epi16(v2, x2), _mm256_maddubs_epi16(v3, x3)));
            dot = _mm256_madd_epi16(p, ones);
          }
          __m256 a = acc[i][h];
          if (kind != K_Q8_0) a = _mm256_fnmadd_ps(T, _mm256_loadu_ps(c), a);  // the offsets' share
          acc[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(S, _mm256_loadu_ps(d)), a);
        }
      }
    }
    for (int i = 0; i < MB; i++) out[(size_t)i * outStride + r] = hsum256(_mm256_add_ps(acc[i][0], acc[i][1]));
  }
}

#define BLOCK_KINDS(MB)                                                                                       \
  static void blockRows##MB(int kind, const uint8_t* w, int nsb, int kpad, int r0, int r1, const int8_t* q,  \
                            const float* dx16, const float* c16, float* out, int os) {                       \
    switch (kind) {                                                                                          \
      case K_Q4_0: blockRows(K_Q4_0, MB, w, nsb, kpad, r0, r1, q, dx16, c16, out, os); break;                \
      case K_Q8_0: blockRows(K_Q8_0, MB, w, nsb, kpad, r0, r1, q, dx16, c16, out, os); break;                \
      case K_Q4_K: blockRows(K_Q4_K, MB, w, nsb, kpad, r0, r1, q, dx16, c16, out, os); break;                \
      case K_Q5_K: blockRows(K_Q5_K, MB, w, nsb, kpad, r0, r1, q, dx16, c16, out, os); break;                \
      default: blockRows(K_Q6_K, MB, w, nsb, kpad, r0, r1, q, dx16, c16, out, os); break;                    \
    }                                                                                                        \
  }
BLOCK_KINDS(1)
BLOCK_KINDS(2)
BLOCK_KINDS(3)
BLOCK_KINDS(4)
static void (*const blockRowsBy[MB_MAX + 1])(int, const uint8_t*, int, int, int, int, const int8_t*, const float*,
                                             const float*, float*, int) = {NULL, blockRows1, blockRows2, blockRows3,
                                                                           blockRows4};

// 8 weights of a panel column as f32 (f16 and bf16 widened).
static inline __attribute__((always_inline)) __m256 loadW(int kind, const uint8_t* p) {
  if (kind == K_F32) return _mm256_loadu_ps((const float*)p);
  __m128i h = _mm_loadu_si128((const __m128i*)p);
  if (kind == K_F16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// dense-avx512.c's floatPanel with four vectors of 8 per column and up to FB = 3 x rows (their 12
// sums and a weight vector fill the 16 registers): row r's sum is the same FMA chain over k.
#define FB 3
static inline __attribute__((always_inline)) void floatPanel(int kind, int MB, const uint8_t* panel, int cols,
                                                              const float* x, float* out, int outStride,
                                                              int row0, int limit) {
  const size_t colBytes = PR * floatElem(kind), vecBytes = colBytes / 4;
  __m256 a[FB][4];
  for (int i = 0; i < MB; i++) a[i][0] = a[i][1] = a[i][2] = a[i][3] = _mm256_setzero_ps();
  for (int k = 0; k < cols; k++) {
    const uint8_t* p = panel + (size_t)k * colBytes;
    __m256 b[FB];
    for (int i = 0; i < MB; i++) b[i] = _mm256_broadcast_ss(x + (size_t)i * cols + k);
    for (int v = 0; v < 4; v++) {
      __m256 wv = loadW(kind, p + v * vecBytes);
      for (int i = 0; i < MB; i++) a[i][v] = _mm256_fmadd_ps(wv, b[i], a[i][v]);
    }
  }
  int n = limit - row0 < PR ? limit - row0 : PR;  // the padding rows of the last panel: never written
  for (int i = 0; i < MB; i++)
    for (int v = 0; v < 4 && 8 * v < n; v++) {
      float* o = out + (size_t)i * outStride + row0 + 8 * v;
      if (n >= 8 * v + 8) _mm256_storeu_ps(o, a[i][v]);
      else {
        float t[8];
        _mm256_storeu_ps(t, a[i][v]);
        memcpy(o, t, (size_t)(n - 8 * v) * 4);
      }
    }
}

#define FLOAT_KINDS(MB)                                                                                          \
  static void floatRows##MB(int kind, const uint8_t* w, int cols, int r0, int r1, const float* x, float* out, \
                            int os) {                                                                           \
    const size_t panelBytes = (size_t)PR * cols * floatElem(kind);                                              \
    for (int r = r0; r < r1; r += PR) {                                                                         \
      const uint8_t* panel = w + (size_t)(r / PR) * panelBytes;                                                 \
      if (kind == K_F32) floatPanel(K_F32, MB, panel, cols, x, out, os, r, r1);                                 \
      else if (kind == K_F16) floatPanel(K_F16, MB, panel, cols, x, out, os, r, r1);                            \
      else floatPanel(K_BF16, MB, panel, cols, x, out, os, r, r1);                                              \
    }                                                                                                           \
  }
FLOAT_KINDS(1)
FLOAT_KINDS(2)
FLOAT_KINDS(3)
static void (*const floatRowsBy[FB + 1])(int, const uint8_t*, int, int, int, const float*, float*, int) = {
    NULL, floatRows1, floatRows2, floatRows3};

// x[0, n) rounded to the weight's type (dense.h's roundRow).
static void roundRow(int kind, const float* x, size_t n, float* out) {
  size_t i = 0;
  for (; kind == K_F16 && i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
  for (; i < n; i++) out[i] = kind == K_F16 ? _cvtsh_ss(_cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT)) : bf16Round(x[i]);
}

// y for every x row and weight rows [r0, r1).
static void computeRows(const Job* j, int r0, int r1) {
  const int rows = j->rows, cols = j->cols, kind = j->kind;
  if (!isBlockKind(kind)) {
    for (int i0 = 0; i0 < j->m; i0 += FB) {
      int mb = j->m - i0 < FB ? j->m - i0 : FB;
      floatRowsBy[mb](kind, j->w, cols, r0, r1, j->x + (size_t)i0 * cols, j->y + (size_t)i0 * rows, rows);
    }
    return;
  }
  for (int i0 = 0; i0 < j->m; i0 += MB_MAX) {
    int mb = j->m - i0 < MB_MAX ? j->m - i0 : MB_MAX, kpad = j->kpad;
    blockRowsBy[mb](kind, j->w, j->nsb, kpad, r0, r1, j->q + (size_t)i0 * kpad, j->dx16 + (size_t)i0 * (kpad / 16),
                    j->c16 + (size_t)i0 * (kpad / 16), j->y + (size_t)i0 * rows, rows);
  }
}

const DenseVariant denseAvx2 = {"avx2", quantizeRow, roundRow, computeRows};
