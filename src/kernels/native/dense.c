// Tessera's native dense kernels: y[m, rows] = x[m, cols] . W^T for GGML block weights (q4_0,
// q8_0, q4_K, q5_K, q6_K) and float weights (f32, f16, bf16) at small m, on x86-64 with AVX-512
// (F, BW, VL, VNNI) and F16C. A Node-API addon, built by scripts/build-native.mjs; the
// TypeScript side is native.ts. It never allocates from JS, never keeps a pointer into a JS
// buffer past a call and never touches anything but the arrays it is given (and its per-thread
// activation scratch).
//
// Block weights are repacked once, at prepare (repack()), into one layout per 256 weights (a
// "super-block"): a header with the block's scale data, then the codes, then the high bits of
// 5/6-bit codes as bit masks. The codes of a super-block are four vectors V0..V3 of 64, in an
// order chosen so that 32-bit lane k of every V_j holds codes of the 16-group k (elements
// 16k .. 16k + 15): V_j[4k + b] = code[16k + 4j + b]. Four vpdpbusd into one accumulator then
// leave each 16-group's whole integer sum in its own lane, scaled by one FMA per super-block.
// Activations are quantized into the same order.
//
//   codes  4-bit: 128 bytes, V0 | V1 << 4 in the first 64, V2 | V3 << 4 in the next 64;
//          8-bit (q8_0): V0, V1, V2, V3, 256 bytes
//   q4_0   header: 8 x f16 d (one per 32)                     w = d * (code - 8)
//   q8_0   header: 8 x f16 d; codes uint8 = int8 q + 128       w = d * (code - 128)
//   q4_K   header: f16 d, f16 dmin, u8 sc[8], u8 m[8]          w = d*sc[j] * code - dmin*m[j]
//   q5_K   as q4_K, then 4 x u64 masks: bit i of mask j = bit 4 of V_j[i]
//   q6_K   header: f16 d, i8 sc[16]; 8 x u64 masks: bit 4 of V0..V3, then bit 5 of V0..V3
//                                                             w = d*sc[j/16] * (code - 32)
// Rows are padded with zero codes and zero scales to whole super-blocks.
//
// Activations are quantized per call exactly as llama.cpp's CPU backend quantizes them for the
// weight's kind (quantizeNatural): Q8_0 for q4_0/q8_0 (per 32, the scale rounded to f16), Q8_K
// for K-quants (per 256); per 16 values c = d * sum(q). f16/bf16 weights: x rounded to the
// weight's type first (roundActivations), as llama.cpp's F16/BF16 vec_dot_type. Then for every block
//   sum_k w_k x_k ~= S * dx * sum_k code_k q_k - T * c       (S: the code's scale, T: its offset)
// with the integer sums from vpdpbusd (u8 codes x s8 q, exact in int32). Float sums: f32, a
// fixed order per row, so a row's result does not depend on m or on the other rows.
// Float weights: f32 FMA (f16 and bf16 widened as they are loaded), over rows repacked into
// panels of 32, column-major inside (floatPanel): each row's sum is one FMA chain over its
// columns in order, whatever m.
#include <node_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum Kind { K_F32 = 0, K_F16 = 1, K_BF16 = 2, K_Q4_0 = 3, K_Q8_0 = 4, K_Q4_K = 5, K_Q5_K = 6, K_Q6_K = 7 };

#define QK 256
// Repacked bytes per super-block.
static int superBytes(int kind) {
  switch (kind) {
    case K_Q4_0: return 16 + 128;
    case K_Q8_0: return 16 + 256;
    case K_Q4_K: return 20 + 128;
    case K_Q5_K: return 20 + 128 + 32;
    case K_Q6_K: return 18 + 128 + 64;
    default: return 0;
  }
}
static int isBlockKind(int kind) { return kind >= K_Q4_0 && kind <= K_Q6_K; }
// Float weights: panels of PR rows, column-major inside (see floatPanel).
#define PR 32
static int floatRowsPad(int rows) { return (rows + PR - 1) / PR * PR; }
static size_t floatElem(int kind) { return kind == K_F32 ? 4 : 2; }
// Bytes of a repacked weight.
static size_t weightBytes(int kind, int rows, int cols) {
  if (!isBlockKind(kind)) return (size_t)floatRowsPad(rows) * cols * floatElem(kind);
  return (size_t)rows * ((cols + QK - 1) / QK) * superBytes(kind);
}

static uint16_t rd16(const uint8_t* p) { return (uint16_t)(p[0] | (p[1] << 8)); }

// ---------------------------------------------------------------- repacking (plain C)
// Puts the 256 codes of one super-block (natural order, values < 64) into the layout above.
static void putCodes(const uint8_t codes[256], int bits, uint8_t* dst) {
  uint8_t v[4][64];
  for (int j = 0; j < 4; j++)
    for (int k = 0; k < 16; k++)
      for (int b = 0; b < 4; b++) v[j][4 * k + b] = codes[16 * k + 4 * j + b];
  if (bits == 8) {
    for (int j = 0; j < 4; j++) memcpy(dst + 64 * j, v[j], 64);
    return;
  }
  for (int i = 0; i < 64; i++) {
    dst[i] = (v[0][i] & 15) | ((v[1][i] & 15) << 4);
    dst[64 + i] = (v[2][i] & 15) | ((v[3][i] & 15) << 4);
  }
  if (bits <= 4) return;
  uint8_t* masks = dst + 128;
  for (int bit = 4; bit < bits; bit++)
    for (int j = 0; j < 4; j++) {
      uint64_t mask = 0;
      for (int i = 0; i < 64; i++)
        if ((v[j][i] >> bit) & 1) mask |= (uint64_t)1 << i;
      memcpy(masks + 8 * (4 * (bit - 4) + j), &mask, 8);
    }
}

static void scaleMinK4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// One row: src in GGML's layout, dst in ours; cols a multiple of 32 (of 256 for K-quants).
static void repackRow(int kind, const uint8_t* src, int cols, uint8_t* dst) {
  int nsb = (cols + QK - 1) / QK, sb_bytes = superBytes(kind);
  uint8_t codes[256];
  memset(dst, 0, (size_t)nsb * sb_bytes);
  for (int s = 0; s < nsb; s++) {
    uint8_t* out = dst + (size_t)s * sb_bytes;
    memset(codes, 0, sizeof codes);
    if (kind == K_Q4_0 || kind == K_Q8_0) {
      int blockBytes = kind == K_Q4_0 ? 18 : 34;
      int first = s * 8, nb = cols / 32 - first < 8 ? cols / 32 - first : 8;
      for (int b = 0; b < nb; b++) {
        const uint8_t* blk = src + (size_t)(first + b) * blockBytes;
        memcpy(out + 2 * b, blk, 2);
        for (int j = 0; j < 32; j++) {
          if (kind == K_Q4_0) codes[32 * b + j] = j < 16 ? blk[2 + j] & 15 : blk[2 + j - 16] >> 4;
          else codes[32 * b + j] = (uint8_t)(blk[2 + j] ^ 0x80);
        }
      }
      putCodes(codes, kind == K_Q4_0 ? 4 : 8, out + 16);
    } else if (kind == K_Q4_K || kind == K_Q5_K) {
      const uint8_t* blk = src + (size_t)s * (kind == K_Q4_K ? 144 : 176);
      memcpy(out, blk, 4);  // d, dmin
      for (int j = 0; j < 8; j++) scaleMinK4(j, blk + 4, out + 4 + j, out + 12 + j);
      const uint8_t* qh = blk + 16;
      const uint8_t* qs = blk + (kind == K_Q4_K ? 16 : 48);
      for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
          uint8_t lo = qs[32 * c + l] & 15, hi = qs[32 * c + l] >> 4;
          if (kind == K_Q5_K) {
            lo |= ((qh[l] >> (2 * c)) & 1) << 4;
            hi |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
          }
          codes[64 * c + l] = lo;
          codes[64 * c + 32 + l] = hi;
        }
      putCodes(codes, kind == K_Q4_K ? 4 : 5, out + 20);
    } else {  // K_Q6_K
      const uint8_t* blk = src + (size_t)s * 210;
      memcpy(out, blk + 208, 2);
      memcpy(out + 2, blk + 192, 16);
      for (int n = 0; n < 2; n++) {
        const uint8_t* ql = blk + 64 * n;
        const uint8_t* qh = blk + 128 + 32 * n;
        for (int l = 0; l < 32; l++) {
          codes[128 * n + l] = (ql[l] & 15) | (((qh[l] >> 0) & 3) << 4);
          codes[128 * n + 32 + l] = (ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4);
          codes[128 * n + 64 + l] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
          codes[128 * n + 96 + l] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
        }
      }
      putCodes(codes, 6, out + 18);
    }
  }
}

// Float weights into panels of PR rows, column-major inside (floatPanel), zero padded.
static void repackFloat(int kind, const uint8_t* src, int rows, int cols, uint8_t* dst) {
  size_t elem = floatElem(kind);
  memset(dst, 0, weightBytes(kind, rows, cols));
  for (int r = 0; r < rows; r++) {
    uint8_t* panel = dst + (size_t)(r / PR) * PR * cols * elem;
    const uint8_t* row = src + (size_t)r * cols * elem;
    for (int k = 0; k < cols; k++) memcpy(panel + ((size_t)k * PR + r % PR) * elem, row + (size_t)k * elem, elem);
  }
}

// ---------------------------------------------------------------- AVX-512 kernels
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")
#include <immintrin.h>

#define MB_MAX 4

// Per-thread activation scratch, grown as needed.
static _Thread_local int8_t* sq;
static _Thread_local float *sdx, *sc16;
static _Thread_local size_t scap;

static int ensureScratch(size_t kpad, int m) {
  size_t need = kpad * (size_t)m;
  if (need <= scap) return 1;
  free(sq);
  free(sdx);
  free(sc16);
  sq = aligned_alloc(64, need);
  sdx = aligned_alloc(64, need / 16 * 4);
  sc16 = aligned_alloc(64, need / 16 * 4);
  if (!sq || !sdx || !sc16) {
    scap = 0;
    return 0;
  }
  scap = need;
  return 1;
}

static inline float hsum512(__m512 v) { return _mm512_reduce_add_ps(v); }

// q[kpad] int8 in element order, dx16, c16 as quantizeRow's, bit for bit as llama.cpp quantizes
// the activations it multiplies with `kind` (ggml-cpu, x86; both round to nearest even):
//   q4_0, q8_0 (vec_dot_type Q8_0, quantize_row_q8_0): per 32 values id = 127/amax,
//     q = round(x * id), d = f16(amax / 127): the scale the dot product uses is the f16 one;
//   K-quants (Q8_K, quantize_row_q8_K_ref): per 256 values iscale = 127/amax,
//     q = round(iscale * x), d = 1/iscale (f32). (ggml writes -127/max, max the signed value of
//     largest magnitude: that negates q and d together, the same products.)
// Per-32 scales for K-quants (as before) were finer than llama.cpp's, but not its numbers: on
// models with outlier channels its per-256 rounding moves logits by nats, and greedy paths split.
static void quantizeNatural(int kind, const float* x, int cols, int kpad, int8_t* q, float* dx16, float* c16) {
  const int group = kind >= K_Q4_K ? 256 : 32;
  for (int g = 0; g < kpad / group; g++) {
    int at = group * g, n = cols - at;
    if (n <= 0) {
      memset(q + at, 0, group);
      for (int i = 0; i < group / 16; i++) dx16[at / 16 + i] = c16[at / 16 + i] = 0;
      continue;
    }
    __m512 amaxv = _mm512_setzero_ps();
    for (int v = 0; v < group / 16; v++) {
      int left = n - 16 * v;
      __mmask16 mk = left >= 16 ? 0xFFFF : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
      amaxv = _mm512_max_ps(amaxv, _mm512_abs_ps(_mm512_maskz_loadu_ps(mk, x + at + 16 * v)));
    }
    float amax = _mm512_reduce_max_ps(amaxv), id, d;
    if (group == 32) {
      d = _cvtsh_ss(_cvtss_sh(amax / 127.0f, _MM_FROUND_TO_NEAREST_INT));
      id = amax != 0 ? 127.0f / amax : 0.0f;
    } else {
      id = amax != 0 ? 127.0f / amax : 0.0f;
      d = amax != 0 ? 1.0f / id : 0.0f;
    }
    for (int v = 0; v < group / 16; v++) {
      int left = n - 16 * v;
      __mmask16 mk = left >= 16 ? 0xFFFF : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
      __m512i iv = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(mk, x + at + 16 * v), _mm512_set1_ps(id)));
      _mm_storeu_si128((__m128i*)(q + at + 16 * v), _mm512_cvtsepi32_epi8(iv));
      dx16[at / 16 + v] = d;
      c16[at / 16 + v] = d * (float)_mm512_reduce_add_epi32(iv);
    }
  }
}

// q[kpad] int8 (in the codes' order, per super-block), dx16[kpad/16] (d of the 32-block, per 16),
// c16[kpad/16] = d * sum of the 16 q.
static void quantizeRow(int kind, const float* x, int cols, int kpad, int8_t* q, float* dx16, float* c16) {
  static const int32_t order[4][16] = {
      {0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60},
      {1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45, 49, 53, 57, 61},
      {2, 6, 10, 14, 18, 22, 26, 30, 34, 38, 42, 46, 50, 54, 58, 62},
      {3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47, 51, 55, 59, 63},
  };
  quantizeNatural(kind, x, cols, kpad, q, dx16, c16);
  // Word w = 4k + j of a super-block (elements 16k + 4j ..) moves to word 16j + k.
  for (int s = 0; s < kpad / QK; s++) {
    int32_t* words = (int32_t*)(q + QK * s);
    __m512i n0 = _mm512_loadu_si512(words), n1 = _mm512_loadu_si512(words + 16);
    __m512i n2 = _mm512_loadu_si512(words + 32), n3 = _mm512_loadu_si512(words + 48);
    for (int j = 0; j < 4; j++) {
      // Output word 16j + k = input word 4k + j: k < 8 from n0 | n1, k >= 8 from n2 | n3 (the
      // index's low 5 bits pick among the two it is given).
      __m512i idx = _mm512_loadu_si512(order[j]);
      __m512i lo = _mm512_permutex2var_epi32(n0, idx, n1);
      __m512i hi = _mm512_permutex2var_epi32(n2, idx, n3);
      __m512i v = _mm512_mask_blend_epi32(0xFF00, lo, hi);
      _mm512_storeu_si512(words + 16 * j, v);  // n0..n3 hold the inputs: in place is safe
    }
  }
}

// Weight-side factors of one super-block: S16 (per 16 weights: the code's scale), T16 (offset).
static inline void superFactors(int kind, const uint8_t* h, __m512* S, __m512* T) {
  static const int32_t dup2[16] = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7};
  __m512i idx = _mm512_loadu_si512(dup2);
  if (kind == K_Q4_0 || kind == K_Q8_0) {
    __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)h));
    __m512 s = _mm512_permutexvar_ps(idx, _mm512_castps256_ps512(d));
    *S = s;
    *T = _mm512_mul_ps(s, _mm512_set1_ps(kind == K_Q4_0 ? 8.0f : 128.0f));
  } else if (kind == K_Q4_K || kind == K_Q5_K) {
    float d = _cvtsh_ss(rd16(h)), dmin = _cvtsh_ss(rd16(h + 2));
    __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(h + 4))));
    __m256 mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(h + 12))));
    *S = _mm512_mul_ps(_mm512_permutexvar_ps(idx, _mm512_castps256_ps512(sc)), _mm512_set1_ps(d));
    *T = _mm512_mul_ps(_mm512_permutexvar_ps(idx, _mm512_castps256_ps512(mn)), _mm512_set1_ps(dmin));
  } else {  // q6_K
    float d = _cvtsh_ss(rd16(h));
    __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(h + 2))));
    *S = _mm512_mul_ps(sc, _mm512_set1_ps(d));
    *T = _mm512_mul_ps(*S, _mm512_set1_ps(32.0f));
  }
}


// Rows [r0, r1) of a block weight for MB x rows at once (x quantized in q/dx16/c16 at stride kpad).
static inline __attribute__((always_inline)) void blockRows(int kind, int MB, const uint8_t* w, int rows, int nsb,
                                                             int kpad, int r0, int r1, const int8_t* q,
                                                             const float* dx16, const float* c16, float* out,
                                                             int outStride) {
  const int sbBytes = superBytes(kind);
  const int hdr = kind == K_Q4_0 || kind == K_Q8_0 ? 16 : kind == K_Q6_K ? 18 : 20;
  const __m512i nib = _mm512_set1_epi8(15);
  (void)rows;
  for (int r = r0; r < r1; r++) {
    const uint8_t* row = w + (size_t)r * nsb * sbBytes;
    __m512 acc[MB_MAX];
    for (int i = 0; i < MB; i++) acc[i] = _mm512_setzero_ps();
    for (int s = 0; s < nsb; s++) {
      const uint8_t* sb = row + (size_t)s * sbBytes;
      __m512 S, T, P[MB_MAX];
      superFactors(kind, sb, &S, &T);
      for (int i = 0; i < MB; i++) {
        const float* d = dx16 + (size_t)i * (kpad / 16) + 16 * s;
        const float* c = c16 + (size_t)i * (kpad / 16) + 16 * s;
        P[i] = _mm512_mul_ps(S, _mm512_loadu_ps(d));
        acc[i] = _mm512_fnmadd_ps(T, _mm512_loadu_ps(c), acc[i]);  // the offsets' share
      }
      const uint8_t* codes = sb + hdr;
      __m512i v0, v1, v2, v3;
      if (kind == K_Q8_0) {
        v0 = _mm512_loadu_si512(codes);
        v1 = _mm512_loadu_si512(codes + 64);
        v2 = _mm512_loadu_si512(codes + 128);
        v3 = _mm512_loadu_si512(codes + 192);
      } else {
        __m512i a = _mm512_loadu_si512(codes), b = _mm512_loadu_si512(codes + 64);
        v0 = _mm512_and_si512(a, nib);
        v1 = _mm512_and_si512(_mm512_srli_epi16(a, 4), nib);
        v2 = _mm512_and_si512(b, nib);
        v3 = _mm512_and_si512(_mm512_srli_epi16(b, 4), nib);
        if (kind == K_Q5_K || kind == K_Q6_K) {
          uint64_t mk[8];
          memcpy(mk, codes + 128, kind == K_Q5_K ? 32 : 64);
          const __m512i b4 = _mm512_set1_epi8(16), b5 = _mm512_set1_epi8(32);
          v0 = _mm512_mask_add_epi8(v0, (__mmask64)mk[0], v0, b4);
          v1 = _mm512_mask_add_epi8(v1, (__mmask64)mk[1], v1, b4);
          v2 = _mm512_mask_add_epi8(v2, (__mmask64)mk[2], v2, b4);
          v3 = _mm512_mask_add_epi8(v3, (__mmask64)mk[3], v3, b4);
          if (kind == K_Q6_K) {
            v0 = _mm512_mask_add_epi8(v0, (__mmask64)mk[4], v0, b5);
            v1 = _mm512_mask_add_epi8(v1, (__mmask64)mk[5], v1, b5);
            v2 = _mm512_mask_add_epi8(v2, (__mmask64)mk[6], v2, b5);
            v3 = _mm512_mask_add_epi8(v3, (__mmask64)mk[7], v3, b5);
          }
        }
      }
      for (int i = 0; i < MB; i++) {
        const int8_t* xq = q + (size_t)i * kpad + 256 * s;
        __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), v0, _mm512_loadu_si512(xq));
        dot = _mm512_dpbusd_epi32(dot, v1, _mm512_loadu_si512(xq + 64));
        dot = _mm512_dpbusd_epi32(dot, v2, _mm512_loadu_si512(xq + 128));
        dot = _mm512_dpbusd_epi32(dot, v3, _mm512_loadu_si512(xq + 192));
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), P[i], acc[i]);
      }
    }
    for (int i = 0; i < MB; i++) out[(size_t)i * outStride + r] = hsum512(acc[i]);
  }
}

#define BLOCK_KINDS(MB)                                                                                 \
  static void blockRows##MB(int kind, const uint8_t* w, int rows, int nsb, int kpad, int r0, int r1,  \
                            const int8_t* q, const float* dx16, const float* c16, float* out, int os) { \
    switch (kind) {                                                                                    \
      case K_Q4_0: blockRows(K_Q4_0, MB, w, rows, nsb, kpad, r0, r1, q, dx16, c16, out, os); break;    \
      case K_Q8_0: blockRows(K_Q8_0, MB, w, rows, nsb, kpad, r0, r1, q, dx16, c16, out, os); break;    \
      case K_Q4_K: blockRows(K_Q4_K, MB, w, rows, nsb, kpad, r0, r1, q, dx16, c16, out, os); break;    \
      case K_Q5_K: blockRows(K_Q5_K, MB, w, rows, nsb, kpad, r0, r1, q, dx16, c16, out, os); break;    \
      default: blockRows(K_Q6_K, MB, w, rows, nsb, kpad, r0, r1, q, dx16, c16, out, os); break;        \
    }                                                                                                  \
  }
BLOCK_KINDS(1)
BLOCK_KINDS(2)
BLOCK_KINDS(3)
BLOCK_KINDS(4)

static inline __attribute__((always_inline)) __m512 loadW(int kind, const uint8_t* p) {
  if (kind == K_F32) return _mm512_loadu_ps((const float*)p);
  __m256i h = _mm256_loadu_si256((const __m256i*)p);
  if (kind == K_F16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// Float weights are repacked into panels of PR = 32 rows, column-major inside: panel p holds, for
// each column k in turn, w[32p .. 32p + 31][k] (rows padded with zero rows to whole panels). A
// call goes over a panel once per FB x rows, from its start to its end: one forward stream, each
// column's two vectors of weights loaded once and multiplied into all FB rows of x (x[i][k]
// broadcast), the 2 x FB sums in registers. Row r's sum is one FMA chain over k = 0, 1, .., so
// it is the same whatever m, the block of x rows, the chunk or the thread.
//
// It replaced groups of 8 rows interleaved per 32 columns, with a dot product per row (two
// accumulators of 16 columns, summed across lanes at the end). There, at m > 1 a group's rows went
// in sub-groups, each pass reading its part of every piece, strided, and the sums of m x rows
// never fit the registers at once: one thread, f32 32000 x 768 from DRAM took 4.7 ms at m=1 but
// 11.4 at m=8 (8.6 GB/s). Here: 4.3 ms at m=1, 5.0 at m=8 (near the FMA unit's bound: m x rows x
// cols / 16 FMAs at one per cycle), 8.9 at m=16 (two passes, both at that bound); f16 3.8, 5.8,
// 9.7 ms (3.9, 7.9, 12.5 before). m=1 streams as fast as before.
#define FB 8
static inline __attribute__((always_inline)) void floatPanel(int kind, int MB, const uint8_t* panel, int cols,
                                                              const float* x, float* out, int outStride,
                                                              int row0, int limit) {
  const size_t colBytes = PR * floatElem(kind);
  __m512 a0[FB], a1[FB];
  for (int i = 0; i < MB; i++) a0[i] = a1[i] = _mm512_setzero_ps();
  for (int k = 0; k < cols; k++) {
    const uint8_t* p = panel + (size_t)k * colBytes;
    __m512 w0 = loadW(kind, p), w1 = loadW(kind, p + colBytes / 2);
    for (int i = 0; i < MB; i++) {
      __m512 b = _mm512_set1_ps(x[(size_t)i * cols + k]);
      a0[i] = _mm512_fmadd_ps(w0, b, a0[i]);
      a1[i] = _mm512_fmadd_ps(w1, b, a1[i]);
    }
  }
  int n = limit - row0 < PR ? limit - row0 : PR;  // the padding rows of the last panel: never written
  __mmask16 m0 = n >= 16 ? 0xFFFF : (__mmask16)((1u << n) - 1);
  __mmask16 m1 = n >= 32 ? 0xFFFF : n <= 16 ? 0 : (__mmask16)((1u << (n - 16)) - 1);
  for (int i = 0; i < MB; i++) {
    _mm512_mask_storeu_ps(out + (size_t)i * outStride + row0, m0, a0[i]);
    _mm512_mask_storeu_ps(out + (size_t)i * outStride + row0 + 16, m1, a1[i]);
  }
}

// Rows [r0, r1) (r0 a multiple of PR) of a repacked float weight, for MB <= FB x rows.
static inline __attribute__((always_inline)) void floatRows(int kind, int MB, const uint8_t* w, int cols,
                                                             int r0, int r1, const float* x, float* out,
                                                             int outStride) {
  const size_t panelBytes = (size_t)PR * cols * floatElem(kind);
  for (int r = r0; r < r1; r += PR) floatPanel(kind, MB, w + (size_t)(r / PR) * panelBytes, cols, x, out, outStride, r, r1);
}

#define FLOAT_KINDS(MB)                                                                                  \
  static void floatRows##MB(int kind, const uint8_t* w, int cols, int r0, int r1, const float* x, float* out, \
                            int os) {                                                                       \
    if (kind == K_F32) floatRows(K_F32, MB, w, cols, r0, r1, x, out, os);                                   \
    else if (kind == K_F16) floatRows(K_F16, MB, w, cols, r0, r1, x, out, os);                              \
    else floatRows(K_BF16, MB, w, cols, r0, r1, x, out, os);                                                \
  }
FLOAT_KINDS(1)
FLOAT_KINDS(2)
FLOAT_KINDS(3)
FLOAT_KINDS(4)
FLOAT_KINDS(5)
FLOAT_KINDS(6)
FLOAT_KINDS(7)
FLOAT_KINDS(8)
static void (*const floatRowsBy[FB + 1])(int, const uint8_t*, int, int, int, const float*, float*, int) = {
    NULL, floatRows1, floatRows2, floatRows3, floatRows4, floatRows5, floatRows6, floatRows7, floatRows8};

// One matmul call: the weight, x and y, and (block kinds) x quantized into the caller's scratch.
typedef struct {
  int kind, rows, cols, m, nsb, kpad;
  const uint8_t* w;
  const float* x;
  float* y;
  const int8_t* q;
  const float *dx16, *c16;
  int per;  // rows per chunk, when shared with the helpers
} Job;

// f16 / bf16 weights: llama.cpp converts the activations to the weight's type first (vec_dot_type
// F16 / BF16, both rounded to nearest even) and multiplies halves widened to f32; x is rounded
// the same way into this thread's scratch, so the products match its.
static _Thread_local float* sxh;
static _Thread_local size_t sxhcap;

static int roundActivations(Job* j) {
  size_t n = (size_t)j->m * j->cols;
  if (n > sxhcap) {
    free(sxh);
    sxh = aligned_alloc(64, (n + 15) / 16 * 64);
    sxhcap = sxh ? n : 0;
    if (!sxh) return 0;
  }
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_loadu_ps(j->x + i);
    if (j->kind == K_F16) {
      v = _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    } else {  // bf16: ggml_compute_fp32_to_bf16 (NaN kept quiet, else round to nearest even)
      __m512i b = _mm512_castps_si512(v);
      __m512i r = _mm512_add_epi32(_mm512_add_epi32(b, _mm512_set1_epi32(0x7fff)),
                                   _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1)));
      __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
      r = _mm512_mask_or_epi32(r, nan, b, _mm512_set1_epi32(64 << 16));
      v = _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32((int)0xffff0000u)));
    }
    _mm512_storeu_ps(sxh + i, v);
  }
  for (; i < n; i++) {
    float v = j->x[i];
    if (j->kind == K_F16) {
      v = _cvtsh_ss(_cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT));
    } else {
      uint32_t b;
      memcpy(&b, &v, 4);
      b = (b & 0x7fffffff) > 0x7f800000 ? (b | (64 << 16)) & 0xffff0000u : (b + (0x7fff + ((b >> 16) & 1))) & 0xffff0000u;
      memcpy(&v, &b, 4);
    }
    sxh[i] = v;
  }
  j->x = sxh;
  return 1;
}

// Quantizes x for a block kind (rounds it for f16 / bf16) into this thread's scratch; 0 when the
// scratch cannot be had.
static int prepareJob(Job* j) {
  if (j->kind == K_F16 || j->kind == K_BF16) return roundActivations(j);
  if (!isBlockKind(j->kind)) return 1;
  j->nsb = (j->cols + QK - 1) / QK;
  j->kpad = j->nsb * QK;
  if (!ensureScratch((size_t)j->kpad, j->m)) return 0;
  for (int i = 0; i < j->m; i++)
    quantizeRow(j->kind, j->x + (size_t)i * j->cols, j->cols, j->kpad, sq + (size_t)i * j->kpad,
                sdx + (size_t)i * (j->kpad / 16), sc16 + (size_t)i * (j->kpad / 16));
  j->q = sq;
  j->dx16 = sdx;
  j->c16 = sc16;
  return 1;
}

// y for every x row and weight rows [r0, r1).
static void computeRows(const Job* j, int r0, int r1) {
  int rows = j->rows, cols = j->cols, kind = j->kind;
  if (!isBlockKind(kind)) {
    for (int i0 = 0; i0 < j->m; i0 += FB) {
      int mb = j->m - i0 < FB ? j->m - i0 : FB;
      floatRowsBy[mb](kind, j->w, cols, r0, r1, j->x + (size_t)i0 * cols, j->y + (size_t)i0 * rows, rows);
    }
    return;
  }
  for (int i0 = 0; i0 < j->m; i0 += MB_MAX) {
    int mb = j->m - i0 < MB_MAX ? j->m - i0 : MB_MAX;
    float* ys = j->y + (size_t)i0 * rows;
    int kpad = j->kpad, nsb = j->nsb;
    const int8_t* q = j->q + (size_t)i0 * kpad;
    const float* d = j->dx16 + (size_t)i0 * (kpad / 16);
    const float* c = j->c16 + (size_t)i0 * (kpad / 16);
    switch (mb) {
      case 1: blockRows1(kind, j->w, rows, nsb, kpad, r0, r1, q, d, c, ys, rows); break;
      case 2: blockRows2(kind, j->w, rows, nsb, kpad, r0, r1, q, d, c, ys, rows); break;
      case 3: blockRows3(kind, j->w, rows, nsb, kpad, r0, r1, q, d, c, ys, rows); break;
      default: blockRows4(kind, j->w, rows, nsb, kpad, r0, r1, q, d, c, ys, rows); break;
    }
  }
}
#pragma GCC pop_options

// ---------------------------------------------------------------- helper threads
// A call may share its rows with up to MAX_HELPERS persistent helper threads (setThreads). Rows
// go in chunks handed out through one 64-bit ticket, seq (24 bits) | chunks (20) | next (20): a
// thread takes chunk `next` by CAS on the whole ticket, so a helper that read the ticket of an
// ended job fails its CAS (seq differs) and can only ever take a chunk of the job now posted,
// whose `shared` fields were written before its ticket. The caller computes
// chunks too and returns only after every chunk is done (`finished`), so it never waits on a
// helper that is asleep: it does the work itself. Helpers spin for spinMicros after a job (the
// next matmul of a decode step comes within microseconds), yielding the core to any runnable
// thread as they do, then sleep on a futex. One caller at
// a time uses the helpers (a mutex, tried, never waited on); another runs alone. The set is one
// per process, sized by the largest setThreads asked (native.ts); each call says whether it
// wants them.
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#define MAX_HELPERS 7
// A chunk is ~1/8 of one thread's share of the weight, between 32 KiB and 256 KiB: long runs keep
// the hardware prefetchers streaming (a thread jumps to a new place at every chunk). Measured on
// q4_K 65536 x 2048 from DRAM, two threads: 32 KiB chunks 19-24 GB/s, 256 KiB 33-35 GB/s; a
// software prefetch 4 or 16 super-blocks ahead only slowed it down (it was removed).
#define CHUNK_MIN_BYTES (32 * 1024)
#define CHUNK_MAX_BYTES (256 * 1024)
static Job shared;
static _Atomic uint64_t ticket;
static atomic_int finished;
static atomic_uint posted;  // futex word: bumped with every job
static atomic_int sleepers;
static atomic_int helpersWanted, helpersRunning;
static atomic_long spinNanos = 100000;
static pthread_mutex_t callerLock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t configLock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t jobSeq;

static long nowNanos(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000L + t.tv_nsec;
}

// Rows per chunk (see CHUNK_MAX_BYTES), for `threads` threads; whole panels for float weights.
static int chunkRows(const Job* j, int threads) {
  size_t rowBytes = weightBytes(j->kind, PR, j->cols) / PR;
  size_t bytes = rowBytes * j->rows / (8 * (size_t)threads);
  bytes = bytes < CHUNK_MIN_BYTES ? CHUNK_MIN_BYTES : bytes > CHUNK_MAX_BYTES ? CHUNK_MAX_BYTES : bytes;
  size_t r = bytes / rowBytes;
  if (!isBlockKind(j->kind)) return r < PR ? PR : (int)(r / PR * PR);
  return r < 4 ? 4 : (int)r;
}

// Takes and computes chunks of the current job until none is left to take.
static void work(void) {
  for (;;) {
    uint64_t t = atomic_load_explicit(&ticket, memory_order_acquire);
    uint32_t chunks = (uint32_t)(t >> 20) & 0xFFFFF, next = (uint32_t)t & 0xFFFFF;
    if (next >= chunks) return;
    if (!atomic_compare_exchange_weak_explicit(&ticket, &t, t + 1, memory_order_acq_rel, memory_order_acquire))
      continue;
    int per = shared.per, r0 = (int)next * per, r1 = r0 + per > shared.rows ? shared.rows : r0 + per;
    computeRows(&shared, r0, r1);
    atomic_fetch_add_explicit(&finished, 1, memory_order_release);
  }
}

static void* helperMain(void* arg) {
  int index = (int)(intptr_t)arg;
  unsigned seen = atomic_load(&posted);
  for (;;) {
    if (index >= atomic_load(&helpersWanted)) break;
    long until = nowNanos() + atomic_load(&spinNanos);
    unsigned now;
    int spins = 0;
    while ((now = atomic_load_explicit(&posted, memory_order_acquire)) == seen) {
      __builtin_ia32_pause();
      // Every 64 pauses: give the core to any other runnable thread (on a busy 2-core machine the
      // event loop's), and sleep once the spin time is up.
      if (++spins % 64 == 0) sched_yield();
      if (spins % 64 == 0 && nowNanos() > until) {
        atomic_fetch_add(&sleepers, 1);
        if (atomic_load(&posted) == seen) syscall(SYS_futex, &posted, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
        atomic_fetch_sub(&sleepers, 1);
        until = nowNanos() + atomic_load(&spinNanos);
        if (index >= atomic_load(&helpersWanted)) goto out;
      }
    }
    seen = now;
    work();
  }
out:
  atomic_fetch_sub(&helpersRunning, 1);
  return NULL;
}

static void wakeAll(void) {
  atomic_fetch_add(&posted, 1);
  syscall(SYS_futex, &posted, FUTEX_WAKE_PRIVATE, MAX_HELPERS, NULL, NULL, 0);
}

// Helper threads: threads - 1 of them, spinning spinMicros after each job. 0 on failure.
static int setThreads(int threads, long spinMicros) {
  pthread_mutex_lock(&configLock);
  pthread_mutex_lock(&callerLock);
  atomic_store(&spinNanos, spinMicros * 1000);
  int want = threads - 1 < 0 ? 0 : threads - 1 > MAX_HELPERS ? MAX_HELPERS : threads - 1;
  // Stop every helper, then start `want` new ones (simple, and rare: once per engine).
  atomic_store(&helpersWanted, 0);
  while (atomic_load(&helpersRunning) > 0) {
    wakeAll();
    usleep(100);
  }
  int ok = 1;
  atomic_store(&helpersWanted, want);
  for (int i = 0; i < want; i++) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    atomic_fetch_add(&helpersRunning, 1);
    if (pthread_create(&t, &attr, helperMain, (void*)(intptr_t)i) != 0) {
      atomic_fetch_sub(&helpersRunning, 1);
      atomic_store(&helpersWanted, i);
      ok = 0;
      pthread_attr_destroy(&attr);
      break;
    }
    pthread_attr_destroy(&attr);
  }
  pthread_mutex_unlock(&callerLock);
  pthread_mutex_unlock(&configLock);
  return ok;
}

static int runJob(Job* j, int useHelpers) {
  if (!prepareJob(j)) return 0;
  int per = chunkRows(j, 1 + atomic_load(&helpersWanted)), chunks = (j->rows + per - 1) / per;
  j->per = per;
  if (!useHelpers || chunks < 2 || chunks > 0xFFFFF || atomic_load(&helpersWanted) == 0 || pthread_mutex_trylock(&callerLock) != 0) {
    // Alone, chunk by chunk as the helpers would: every block of x rows (MB_MAX, or FB for float
    // weights) goes over one chunk while it is in L2. Over the whole weight at once, each block streamed it from DRAM
    // again (one thread, 32000 x 768: f16 m=8 14 -> 9.5 ms, f32 m=16 45-48 -> 19-21).
    for (int r0 = 0; r0 < j->rows; r0 += per) computeRows(j, r0, r0 + per > j->rows ? j->rows : r0 + per);
    return 1;
  }
  shared = *j;
  uint32_t seq = ++jobSeq & 0xFFFFFF;
  atomic_store_explicit(&finished, 0, memory_order_relaxed);
  atomic_store_explicit(&ticket, ((uint64_t)seq << 40) | ((uint64_t)chunks << 20), memory_order_release);
  atomic_fetch_add_explicit(&posted, 1, memory_order_release);
  if (atomic_load(&sleepers) > 0) syscall(SYS_futex, &posted, FUTEX_WAKE_PRIVATE, MAX_HELPERS, NULL, NULL, 0);
  work();
  while (atomic_load_explicit(&finished, memory_order_acquire) < chunks) __builtin_ia32_pause();
  pthread_mutex_unlock(&callerLock);
  return 1;
}

// ---------------------------------------------------------------- Node-API glue
#define CHECK(call)                                                    \
  do {                                                                 \
    if ((call) != napi_ok) {                                           \
      napi_throw_error(env, NULL, "tessera-native: " #call " failed"); \
      return NULL;                                                     \
    }                                                                  \
  } while (0)

static int cpuOk(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
         __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
}

static napi_value jsSupported(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value v;
  CHECK(napi_get_boolean(env, cpuOk(), &v));
  return v;
}

static int argInt(napi_env env, napi_value v, int* out) { return napi_get_value_int32(env, v, out) == napi_ok; }

static int typedBytes(napi_env env, napi_value v, void** data, size_t* bytes) {
  napi_typedarray_type type;
  size_t length, offset;
  napi_value ab;
  if (napi_get_typedarray_info(env, v, &type, &length, data, &ab, &offset) != napi_ok) return 0;
  size_t elem = type == napi_float32_array ? 4 : type == napi_uint16_array ? 2 : type == napi_uint8_array ? 1 : 0;
  if (elem == 0) return 0;
  *bytes = length * elem;
  return 1;
}

// repackedBytes(kind, rows, cols): bytes of the repacked weight.
static napi_value jsRepackedBytes(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3], result;
  int kind, rows, cols;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc != 3 || !argInt(env, argv[0], &kind) || !argInt(env, argv[1], &rows) || !argInt(env, argv[2], &cols) ||
      kind < 0 || kind > K_Q6_K || rows < 0 || cols <= 0) {
    napi_throw_type_error(env, NULL, "repackedBytes(kind, rows, cols): bad arguments");
    return NULL;
  }
  double bytes = (double)weightBytes(kind, rows, cols);
  CHECK(napi_create_double(env, bytes, &result));
  return result;
}

// repack(kind, src: Uint8Array, rows, cols, dst: Uint8Array)
static napi_value jsRepack(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  int kind, rows, cols;
  void *src, *dst;
  size_t srcBytes, dstBytes;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc != 5 || !argInt(env, argv[0], &kind) || !argInt(env, argv[2], &rows) || !argInt(env, argv[3], &cols) ||
      !typedBytes(env, argv[1], &src, &srcBytes) || !typedBytes(env, argv[4], &dst, &dstBytes) ||
      kind < 0 || kind > K_Q6_K || rows < 0 || cols <= 0) {
    napi_throw_type_error(env, NULL, "repack(kind, src, rows, cols, dst): bad arguments");
    return NULL;
  }
  if (!isBlockKind(kind)) {
    if (srcBytes != (size_t)rows * cols * floatElem(kind) || dstBytes != weightBytes(kind, rows, cols)) {
      napi_throw_range_error(env, NULL, "repack: src or dst has the wrong byte size");
      return NULL;
    }
    repackFloat(kind, (const uint8_t*)src, rows, cols, (uint8_t*)dst);
    return NULL;
  }
  int kquant = kind >= K_Q4_K;
  if (cols % (kquant ? QK : 32) != 0) {
    napi_throw_range_error(env, NULL, "repack: cols is not a multiple of the block size");
    return NULL;
  }
  size_t srcRow = kquant ? (size_t)(cols / QK) * (kind == K_Q4_K ? 144 : kind == K_Q5_K ? 176 : 210)
                         : (size_t)(cols / 32) * (kind == K_Q4_0 ? 18 : 34);
  size_t dstRow = weightBytes(kind, 1, cols);
  if (srcBytes != srcRow * rows || dstBytes != dstRow * rows) {
    napi_throw_range_error(env, NULL, "repack: src or dst has the wrong byte size");
    return NULL;
  }
  for (int r = 0; r < rows; r++) repackRow(kind, (const uint8_t*)src + srcRow * r, cols, (uint8_t*)dst + dstRow * r);
  return NULL;
}

// matmul(kind, w, rows, cols, x: Float32Array, m, y: Float32Array, helpers: 0 | 1):
// y[m, rows] = x[m, cols] . W^T, with the helper threads when helpers is 1.
static napi_value jsMatmul(napi_env env, napi_callback_info info) {
  size_t argc = 8;
  napi_value argv[8];
  int kind, rows, cols, m, helpers;
  void *w, *x, *y;
  size_t wBytes, xBytes, yBytes;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc != 8 || !argInt(env, argv[7], &helpers) || !argInt(env, argv[0], &kind) || !argInt(env, argv[2], &rows) || !argInt(env, argv[3], &cols) ||
      !argInt(env, argv[5], &m) || !typedBytes(env, argv[1], &w, &wBytes) || !typedBytes(env, argv[4], &x, &xBytes) ||
      !typedBytes(env, argv[6], &y, &yBytes) || kind < 0 || kind > K_Q6_K || rows < 0 || cols <= 0 || m < 0) {
    napi_throw_type_error(env, NULL, "matmul(kind, w, rows, cols, x, m, y, helpers): bad arguments");
    return NULL;
  }
  size_t need = weightBytes(kind, rows, cols);
  if (wBytes != need || xBytes < (size_t)m * cols * 4 || yBytes < (size_t)m * rows * 4) {
    napi_throw_range_error(env, NULL, "matmul: w, x or y has the wrong byte size");
    return NULL;
  }
  Job job = {.kind = kind, .rows = rows, .cols = cols, .m = m, .w = (const uint8_t*)w, .x = (const float*)x,
             .y = (float*)y};
  if (m > 0 && rows > 0 && !runJob(&job, helpers)) {
    napi_throw_error(env, NULL, "matmul: out of memory for the activation scratch");
    return NULL;
  }
  return NULL;
}

// setThreads(threads, spinMicros): threads - 1 helper threads, for calls that ask for them.
static napi_value jsSetThreads(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2], result;
  int threads, spin;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc != 2 || !argInt(env, argv[0], &threads) || !argInt(env, argv[1], &spin) || threads < 1 || spin < 0) {
    napi_throw_type_error(env, NULL, "setThreads(threads >= 1, spinMicros >= 0): bad arguments");
    return NULL;
  }
  CHECK(napi_get_boolean(env, setThreads(threads, spin), &result));
  return result;
}

// alloc(bytes): a zeroed Uint8Array of memory the addon owns, 2 MiB aligned and advised to be
// backed by transparent huge pages: a decode step streams every weight once, and with 4 KiB
// pages it pays a TLB miss (and a hardware-prefetch stop) every 4 KiB. Freed when collected.
static void freeHuge(napi_env env, void* data, void* hint) {
  size_t usable = (size_t)(uintptr_t)hint;
  int64_t total;
  napi_adjust_external_memory(env, -(int64_t)usable, &total);
  munmap(data, usable);
}

static napi_value jsAlloc(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], ab, out;
  double bytesD;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc != 1 || napi_get_value_double(env, argv[0], &bytesD) != napi_ok || !(bytesD >= 0) || bytesD > 1e12) {
    napi_throw_type_error(env, NULL, "alloc(bytes): bad arguments");
    return NULL;
  }
  size_t bytes = (size_t)bytesD, huge = (size_t)2 << 20;
  size_t mapped = (bytes + huge - 1) / huge * huge + huge;  // room to align to 2 MiB
  if (bytes == 0) mapped = huge;
  uint8_t* raw = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    napi_throw_error(env, NULL, "alloc: out of memory");
    return NULL;
  }
  uint8_t* aligned = (uint8_t*)(((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1));
  size_t head = (size_t)(aligned - raw), usable = mapped - head;
  if (head > 0) munmap(raw, head);  // keep [aligned, aligned + usable)
  madvise(aligned, usable, MADV_HUGEPAGE);
  if (napi_create_external_arraybuffer(env, aligned, bytes, freeHuge, (void*)(uintptr_t)usable, &ab) != napi_ok) {
    munmap(aligned, usable);
    napi_throw_error(env, NULL, "alloc: cannot wrap the memory in an ArrayBuffer");
    return NULL;
  }
  CHECK(napi_create_typedarray(env, napi_uint8_array, bytes, ab, 0, &out));
  int64_t total;
  CHECK(napi_adjust_external_memory(env, (int64_t)usable, &total));
  return out;
}

// attention.c's paged attention.
napi_value tesseraAttention(napi_env env, napi_callback_info info);

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"supported", NULL, jsSupported, NULL, NULL, NULL, napi_default, NULL},
      {"repackedBytes", NULL, jsRepackedBytes, NULL, NULL, NULL, napi_default, NULL},
      {"repack", NULL, jsRepack, NULL, NULL, NULL, napi_default, NULL},
      {"matmul", NULL, jsMatmul, NULL, NULL, NULL, napi_default, NULL},
      {"setThreads", NULL, jsSetThreads, NULL, NULL, NULL, napi_default, NULL},
      {"alloc", NULL, jsAlloc, NULL, NULL, NULL, napi_default, NULL},
      {"attention", NULL, tesseraAttention, NULL, NULL, NULL, napi_default, NULL},
  };
  CHECK(napi_define_properties(env, exports, sizeof props / sizeof props[0], props));
  return exports;
}

NAPI_MODULE_INIT() { return init(env, exports); }
