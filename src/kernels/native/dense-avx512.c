// Tessera's dense kernels for AVX-512 (F, BW, VL, VNNI) with F16C: dense.c's layout and
// arithmetic (its header), vpdpbusd over 64 codes at a time. Compiled alone with
// -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mavx2 -mfma -mf16c (scripts/build-native.mjs);
// dense.c calls it only on a CPU with all of them. Never allocates but its per-thread scratch.
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "dense.h"

// Batch 1 (one x row) streams each weight byte once and is bound by memory: a software prefetch
// PREFETCH_BYTES ahead of the super-block being read keeps more lines in flight than the hardware
// prefetchers do alone (they stop at every 4 KiB page). Measured alone on this machine's AMD EPYC
// (weights of 300 MB, static row split, interleaved, best / mean of 10; a plain read 32.7 GB/s on
// 2 threads): one thread q4_K 23.9 / 21.9 -> 27.3 / 26.0 GB/s; two threads q4_K 33.2 / 30.7 ->
// 34.7 / 32.2, q6_K 31.2 / 21.6 -> 31.2 / 28.6, q4_0 32.8 / 31.6 -> 33.7 / 32.4. 512-2048 bytes
// ahead (measured under load) was no better than none (an earlier attempt's 4-16 super-blocks); f16
// panels gained nothing (no prefetch there). Verify steps of 2-7 rows (speculative decoding) are
// still bound by the weight stream on the 1B: prefetching there too took a 5-row step from 48-56
// to 40-48 ms (bench:spec-step, 1B q4_k_m, 2 threads). At m > 1 the first tile over a chunk reads
// it from memory and prefetches too (one thread, 16384 x 2048 q4_K, m = 16: 6.3 -> 5.3 ms).
#define PREFETCH_BYTES 4096

// Lane k of a permute by DUP2 takes lane k / 2: 8 values (one per 32 codes) widened to 16 lanes.
static const int32_t DUP2[16] = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7};

static inline float hsum512(__m512 v) { return _mm512_reduce_add_ps(v); }

// Sixteen hsum512s at once, for x-row blocks of m > 1 (the batch-1 kernel keeps hsum512): each lane's
// sum is hsum512's of its vector bit for bit, the same additions of the same pairs (GCC's
// _mm512_reduce_add_ps: upper + lower 256 bits, then 128, then (v0 + v2) + (v1 + v3)), laid out
// across the lanes of sixteen vectors instead of down one: ~3 instructions a sum instead of ~10.
// Lane 4 L + j of the tree's result holds a[L + 4 j]'s sum; the last permute puts a[p]'s in lane p.
static inline __m512 hsum16(const __m512* a) {
  __m512 b[8], c[4], g[2];
  for (int k = 0; k < 8; k++)  // u = hi256 + lo256, two vectors' in one
    b[k] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0xEE),
                         _mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0x44));
  for (int m = 0; m < 4; m++)  // v = u[4..7] + u[0..3], four vectors' in one
    c[m] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * m], b[2 * m + 1], 0xDD),
                         _mm512_shuffle_f32x4(b[2 * m], b[2 * m + 1], 0x88));
  for (int n = 0; n < 2; n++)  // (v0 + v2, v1 + v3)
    g[n] = _mm512_add_ps(_mm512_shuffle_ps(c[2 * n], c[2 * n + 1], 0x44), _mm512_shuffle_ps(c[2 * n], c[2 * n + 1], 0xEE));
  const __m512 x = _mm512_add_ps(_mm512_shuffle_ps(g[0], g[1], 0x88), _mm512_shuffle_ps(g[0], g[1], 0xDD));
  static const int32_t order[16] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};
  return _mm512_permutexvar_ps(_mm512_loadu_si512(order), x);
}

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
  __m512i idx = _mm512_loadu_si512(DUP2);
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


// Chunk j (codes 64 j .. 64 j + 63, dense.c's V_j) of a super-block as 64 unsigned bytes, from the
// codes' two 64-byte halves (lo, hi; q8_0: `codes` itself) and the high-bit masks after them.
static inline __attribute__((always_inline)) __m512i codeChunk(int kind, const uint8_t* codes, __m512i lo, __m512i hi,
                                                                int j) {
  if (kind == K_Q8_0) return _mm512_loadu_si512(codes + 64 * j);
  __m512i h = j < 2 ? lo : hi;
  __m512i v = _mm512_and_si512(j & 1 ? _mm512_srli_epi16(h, 4) : h, _mm512_set1_epi8(15));
  if (kind == K_Q5_K || kind == K_Q6_K) {
    uint64_t m4, m5;
    memcpy(&m4, codes + 128 + 8 * j, 8);
    v = _mm512_mask_add_epi8(v, (__mmask64)m4, v, _mm512_set1_epi8(16));
    if (kind == K_Q6_K) {
      memcpy(&m5, codes + 160 + 8 * j, 8);
      v = _mm512_mask_add_epi8(v, (__mmask64)m5, v, _mm512_set1_epi8(32));
    }
  }
  return v;
}

// Rows [r0, r1) of a block weight for one x row (batch 1: decode steps).
// nta (a constant): prefetch the weights non-temporally (a batch-1 step, which reads each byte once).
static inline __attribute__((always_inline)) void blockRows(int kind, int nta, const uint8_t* w, int nsb, int r0,
                                                             int r1, const int8_t* q, const float* dx16,
                                                             const float* c16, float* out) {
  const int sbBytes = superBytes(kind);
  const int hdr = kind == K_Q4_0 || kind == K_Q8_0 ? 16 : kind == K_Q6_K ? 18 : 20;
  for (int r = r0; r < r1; r++) {
    const uint8_t* row = w + (size_t)r * nsb * sbBytes;
    __m512 acc = _mm512_setzero_ps();
    for (int s = 0; s < nsb; s++) {
      const uint8_t* sb = row + (size_t)s * sbBytes;
      for (int o = 0; o < sbBytes; o += 64)
        if (nta) _mm_prefetch((const char*)sb + PREFETCH_BYTES + o, _MM_HINT_NTA);
        else _mm_prefetch((const char*)sb + PREFETCH_BYTES + o, _MM_HINT_T0);
      __m512 S, T, P;
      superFactors(kind, sb, &S, &T);
      P = _mm512_mul_ps(S, _mm512_loadu_ps(dx16 + 16 * s));
      acc = _mm512_fnmadd_ps(T, _mm512_loadu_ps(c16 + 16 * s), acc);  // the offsets' share
      const uint8_t* codes = sb + hdr;
      __m512i lo = _mm512_setzero_si512(), hi = lo;
      if (kind != K_Q8_0) {
        lo = _mm512_loadu_si512(codes);
        hi = _mm512_loadu_si512(codes + 64);
      }
      __m512i v0 = codeChunk(kind, codes, lo, hi, 0), v1 = codeChunk(kind, codes, lo, hi, 1);
      __m512i v2 = codeChunk(kind, codes, lo, hi, 2), v3 = codeChunk(kind, codes, lo, hi, 3);
      __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), v0, _mm512_loadu_si512(q + 256 * s));
      dot = _mm512_dpbusd_epi32(dot, v1, _mm512_loadu_si512(q + 256 * s + 64));
      dot = _mm512_dpbusd_epi32(dot, v2, _mm512_loadu_si512(q + 256 * s + 128));
      dot = _mm512_dpbusd_epi32(dot, v3, _mm512_loadu_si512(q + 256 * s + 192));
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), P, acc);
    }
    out[r] = hsum512(acc);
  }
}

// One x row over rows [r0, r1). nta: this call is the only one to read these rows this step (a
// batch-1 step), so its prefetches are non-temporal: the weights, 95% of a 1B step's bytes, pass
// through without evicting from L2 / L3 what the step's small calls between matmuls use (their
// code, the activations, the KV rows just written). 1B q4_k_m, batch 1: attention 0.40-0.44 ->
// 0.28-0.38 ms a token at depth 0, the step 3-7% faster in pairs; the weight stream alone the same
// (15.3-16.0 ms against 15.5-15.7).
static void blockRows1(int kind, int nta, const uint8_t* w, int nsb, int r0, int r1, const int8_t* q,
                       const float* dx16, const float* c16, float* out) {
#define BLOCK_ROWS_NTA(K) \
  if (nta) blockRows(K, 1, w, nsb, r0, r1, q, dx16, c16, out); else blockRows(K, 0, w, nsb, r0, r1, q, dx16, c16, out);
  switch (kind) {
    case K_Q4_0: BLOCK_ROWS_NTA(K_Q4_0) break;
    case K_Q8_0: BLOCK_ROWS_NTA(K_Q8_0) break;
    case K_Q4_K: BLOCK_ROWS_NTA(K_Q4_K) break;
    case K_Q5_K: BLOCK_ROWS_NTA(K_Q5_K) break;
    default: BLOCK_ROWS_NTA(K_Q6_K) break;
  }
}

// ---- m > 1: tiles of up to IT x rows over one weight row at a time.
// Per (weight row, x row, super-block) the work is 4 vpdpbusd and 3 float ops (P = S * dx, the
// offsets' fnmadd, the fma), all on the two pipes vpdpbusd and float multiplies share on Zen 4 (one
// zmm op a cycle between them, measured), and 4 zmm loads of x besides c and dx (one a cycle).
// Where the scale is per 32 codes (q4_0, q8_0, q4_K, q5_K: S and dx hold 8 distinct values in 16
// lanes) P is one 8-lane multiply widened by a permute (another pipe). The tile's x rows are
// packed first (packTile) so that one pointer walks them: a pointer each for q, dx and c of 8 rows
// (the kernel before) spilled, and rows of 8192 columns sat on the same L1 sets. 2 weight rows x
// 4 x rows (an x load serving 2 rows) measured slower than 1 x 8 (registers), as did 4 x 2, 2 x 2.
// One thread, m = 16, the 1B's and m100's shapes: 1.12-1.56x the kernel before (benchmarks.md, serve).
// Same float operations, in the same order, for every (row, x row) pair as the batch-1 kernel
// (lane for lane: S8[k] * dx8[k] is the product the 16-lane multiply makes in lanes 2k and 2k + 1,
// dx16 holding one value per 32 codes, or per super-block for K-quants); only the exact integer
// dot's order differs.
#define IT 8

// Keeps v in a register: GCC otherwise folds its load into each of its uses.
static inline __attribute__((always_inline)) void inRegister(__m512i* v) { __asm__("" : "+v"(*v)); }

// The packed tile: per super-block s, for the tile's I x rows, q (I x 256 bytes, the codes' order),
// c16 (I x 16 floats), dx8 (I x 8 floats: dx16's even lanes), padded to 64 bytes.
static inline size_t tileStride(int I) { return ((size_t)I * (256 + 64 + 32) + 63) / 64 * 64; }
static _Thread_local uint8_t* tileBuf;
static _Thread_local size_t tileCap;

// x rows [i0, i0 + I) of j packed into this thread's tile scratch; NULL when it cannot be had.
// computeRows runs per chunk, so each chunk a thread takes packs its tiles again (x is small next to
// a chunk's weight rows); packing once per job, in dense.c's prepareJob, would save that copy.
static const uint8_t* packTile(const Job* j, int i0, int I) {
  static const int32_t even[16] = {0, 2, 4, 6, 8, 10, 12, 14, 0, 2, 4, 6, 8, 10, 12, 14};
  const size_t stride = tileStride(I), need = stride * (size_t)j->nsb, xs = (size_t)j->kpad / 16;
  if (need > tileCap) {
    free(tileBuf);
    tileBuf = aligned_alloc(64, need);
    tileCap = tileBuf ? need : 0;
    if (!tileBuf) return NULL;
  }
  const __m512i idx = _mm512_loadu_si512(even);
  for (int s = 0; s < j->nsb; s++) {
    uint8_t* t = tileBuf + (size_t)s * stride;
    for (int i = 0; i < I; i++) {
      const int8_t* q = j->q + (size_t)(i0 + i) * j->kpad + 256 * s;
      for (int k = 0; k < 4; k++) _mm512_store_si512(t + 256 * i + 64 * k, _mm512_loadu_si512(q + 64 * k));
      const float* d = j->dx16 + (size_t)(i0 + i) * xs + 16 * s;
      _mm512_storeu_ps(t + 256 * I + 64 * i, _mm512_loadu_ps(j->c16 + (size_t)(i0 + i) * xs + 16 * s));
      _mm256_storeu_ps((float*)(t + 320 * I + 32 * i),
                       _mm512_castps512_ps256(_mm512_permutexvar_ps(idx, _mm512_loadu_ps(d))));
    }
  }
  return tileBuf;
}

// superFactors' S and T, the same values lane for lane; for the kinds with a scale per 32 codes,
// S as its 8 distinct values (S8: lane k holds S's lanes 2k and 2k + 1).
static inline __attribute__((always_inline)) void tileFactors(int kind, const uint8_t* h, __m256* S8, __m512* S,
                                                               __m512* T) {
  const __m512i idx = _mm512_loadu_si512(DUP2);
  if (kind == K_Q4_0 || kind == K_Q8_0) {
    *S8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)h));
    __m256 t = _mm256_mul_ps(*S8, _mm256_set1_ps(kind == K_Q4_0 ? 8.0f : 128.0f));
    *T = _mm512_permutexvar_ps(idx, _mm512_castps256_ps512(t));
  } else if (kind == K_Q4_K || kind == K_Q5_K) {
    float d = _cvtsh_ss(rd16(h)), dmin = _cvtsh_ss(rd16(h + 2));
    __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(h + 4))));
    __m256 mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(h + 12))));
    *S8 = _mm256_mul_ps(sc, _mm256_set1_ps(d));
    *T = _mm512_permutexvar_ps(idx, _mm512_castps256_ps512(_mm256_mul_ps(mn, _mm256_set1_ps(dmin))));
  } else {  // q6_K: a scale per 16 codes
    float d = _cvtsh_ss(rd16(h));
    __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(h + 2))));
    *S = _mm512_mul_ps(sc, _mm512_set1_ps(d));
    *T = _mm512_mul_ps(*S, _mm512_set1_ps(32.0f));
  }
}

// Adds super-blocks [s0, s1) of weight row `row` to the sums (16 lanes, not yet reduced) of the
// packed tile's I x rows.
static inline __attribute__((always_inline)) void tileStep(int kind, int I, const uint8_t* row, int s0, int s1,
                                                            const uint8_t* tile, int prefetch, __m512 acc[IT]) {
  const int sbBytes = superBytes(kind);
  const int hdr = kind == K_Q4_0 || kind == K_Q8_0 ? 16 : kind == K_Q6_K ? 18 : 20;
  const size_t stride = tileStride(I);
  for (int s = s0; s < s1; s++) {
    const uint8_t* t = tile + (size_t)s * stride;
    const uint8_t* sb = row + (size_t)s * sbBytes;
    if (prefetch)
      for (int o = 0; o < sbBytes; o += 64) _mm_prefetch((const char*)sb + PREFETCH_BYTES + o, _MM_HINT_T0);
    __m512i lo = _mm512_setzero_si512(), hi = lo, dot[IT];
    if (kind != K_Q8_0) {
      lo = _mm512_loadu_si512(sb + hdr);
      hi = _mm512_loadu_si512(sb + hdr + 64);
      inRegister(&lo);
      inRegister(&hi);
    }
    for (int j = 0; j < 4; j++) {
      __m512i v = codeChunk(kind, sb + hdr, lo, hi, j);
      for (int i = 0; i < I; i++)
        dot[i] = _mm512_dpbusd_epi32(j == 0 ? _mm512_setzero_si512() : dot[i], v, _mm512_load_si512(t + 256 * i + 64 * j));
    }
    const float* c = (const float*)(t + 256 * I);
    const float* d8 = (const float*)(t + 320 * I);
    __m256 S8;
    __m512 S, T;
    tileFactors(kind, sb, &S8, &S, &T);
    for (int i = 0; i < I; i++) {
      __m512 P;
      if (kind == K_Q6_K)  // Q8_K: dx16 is one value over the super-block
        P = _mm512_mul_ps(S, _mm512_set1_ps(d8[8 * i]));
      else
        P = _mm512_permutexvar_ps(_mm512_loadu_si512(DUP2),
                                  _mm512_castps256_ps512(_mm256_mul_ps(S8, _mm256_load_ps(d8 + 8 * i))));
      acc[i] = _mm512_fnmadd_ps(T, _mm512_load_ps(c + 16 * i), acc[i]);  // the offsets' share
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[i]), P, acc[i]);
    }
  }
}

// x bytes of a tile kept in L1 while a chunk's rows go over it: a longer tile (ffn_down's 8192
// columns: 90 KB for 8 x rows) is taken in slabs of super-blocks, every row over a slab before the
// next, the sums kept in memory in between (exact: the same additions in the same order). One
// thread, 2048 x 8192 q4_K, m = 8, cycles a (row, x row, super-block): 14.8 in one pass, 11.0 in
// slabs of 6-32 KB (the old kernel 13.3).
#define SLAB_BYTES (24 * 1024)
static _Thread_local __m512* slabSums;
static _Thread_local size_t slabCap;

// Rows [r0, r1) of a block weight for a packed tile of I <= IT x rows; each x row's sums of 16
// weight rows are reduced together (hsum16), a last few with hsum512 (the same bits).
static inline __attribute__((always_inline)) void tileRows(int kind, int I, const uint8_t* w, int nsb, int r0,
                                                            int r1, const uint8_t* tile, float* out, int outStride,
                                                            int prefetch) {
  const size_t rowBytes = (size_t)nsb * superBytes(kind);
  int slab = (int)(SLAB_BYTES / tileStride(I));
  if (slab < 1) slab = 1;
  if (slab < nsb && (size_t)(r1 - r0) * I > slabCap) {
    free(slabSums);
    slabSums = aligned_alloc(64, (size_t)(r1 - r0) * I * 64);
    slabCap = slabSums ? (size_t)(r1 - r0) * I : 0;
  }
  if (slab >= nsb || slabSums == NULL) slab = nsb;  // one pass (no scratch: the same bits, slower)
  __m512 pend[IT][16];
  int pending = 0, pendFirst = r0;
  for (int s0 = 0; s0 < nsb; s0 += slab) {
    const int s1 = nsb - s0 > slab ? s0 + slab : nsb;
    for (int r = r0; r < r1; r++) {
      __m512 acc[IT];
      __m512* kept = slab < nsb ? slabSums + (size_t)(r - r0) * I : NULL;  // used only when slabbing
      for (int i = 0; i < I; i++) acc[i] = s0 == 0 ? _mm512_setzero_ps() : _mm512_load_ps((const float*)&kept[i]);
      tileStep(kind, I, w + r * rowBytes, s0, s1, tile, prefetch && s0 == 0, acc);
      if (s1 < nsb) {
        for (int i = 0; i < I; i++) _mm512_store_ps((float*)&kept[i], acc[i]);
        continue;
      }
      for (int i = 0; i < I; i++) pend[i][pending] = acc[i];
      if (++pending == 16) {
        for (int i = 0; i < I; i++) _mm512_storeu_ps(out + (size_t)i * outStride + pendFirst, hsum16(pend[i]));
        pending = 0;
        pendFirst = r + 1;
      }
    }
  }
  for (int k = 0; k < pending; k++)
    for (int i = 0; i < I; i++) out[(size_t)i * outStride + pendFirst + k] = hsum512(pend[i][k]);
}

#define TILE_KINDS(I)                                                                                       \
  static void tileRows##I(int kind, const uint8_t* w, int nsb, int r0, int r1, const uint8_t* tile, float* out, \
                          int os, int pf) {                                                                  \
    switch (kind) {                                                                                         \
      case K_Q4_0: tileRows(K_Q4_0, I, w, nsb, r0, r1, tile, out, os, pf); break;                           \
      case K_Q8_0: tileRows(K_Q8_0, I, w, nsb, r0, r1, tile, out, os, pf); break;                           \
      case K_Q4_K: tileRows(K_Q4_K, I, w, nsb, r0, r1, tile, out, os, pf); break;                           \
      case K_Q5_K: tileRows(K_Q5_K, I, w, nsb, r0, r1, tile, out, os, pf); break;                           \
      default: tileRows(K_Q6_K, I, w, nsb, r0, r1, tile, out, os, pf); break;                               \
    }                                                                                                       \
  }
TILE_KINDS(2) TILE_KINDS(3) TILE_KINDS(4) TILE_KINDS(5) TILE_KINDS(6) TILE_KINDS(7) TILE_KINDS(8)
typedef void (*TileFn)(int, const uint8_t*, int, int, int, const uint8_t*, float*, int, int);
static const TileFn tileRowsBy[IT + 1] = {NULL,      NULL,      tileRows2, tileRows3, tileRows4,
                                          tileRows5, tileRows6, tileRows7, tileRows8};

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



// f16 / bf16 weights: x[0, n) rounded to the weight's type (dense.h's roundActivations).
static void roundRow(int kind, const float* x, size_t n, float* out) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_loadu_ps(x + i);
    if (kind == K_F16) {
      v = _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    } else {  // bf16: ggml_compute_fp32_to_bf16 (NaN kept quiet, else round to nearest even)
      __m512i b = _mm512_castps_si512(v);
      __m512i r = _mm512_add_epi32(_mm512_add_epi32(b, _mm512_set1_epi32(0x7fff)),
                                   _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1)));
      __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
      r = _mm512_mask_or_epi32(r, nan, b, _mm512_set1_epi32(64 << 16));
      v = _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32((int)0xffff0000u)));
    }
    _mm512_storeu_ps(out + i, v);
  }
  for (; i < n; i++) out[i] = kind == K_F16 ? _cvtsh_ss(_cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT)) : bf16Round(x[i]);
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
  const int kpad = j->kpad, nsb = j->nsb, m = j->m;
  if (m == 1) {
    blockRows1(kind, 1, j->w, nsb, r0, r1, j->q, j->dx16, j->c16, j->y);
    return;
  }
  // As few tiles as IT allows, as even as can be (m = 17: 6, 6, 5, not 8, 8, 1).
  const int tiles = (m + IT - 1) / IT;
  for (int k = 0, i0 = 0; k < tiles; k++) {
    const int mb = m / tiles + (k < m % tiles), prefetch = k == 0;
    const uint8_t* tile = packTile(j, i0, mb);
    if (tile != NULL) {
      tileRowsBy[mb](kind, j->w, nsb, r0, r1, tile, j->y + (size_t)i0 * rows, rows, prefetch);
    } else {  // no scratch: x row by x row, the same bits
      for (int i = i0; i < i0 + mb; i++)
        blockRows1(kind, 0, j->w, nsb, r0, r1, j->q + (size_t)i * kpad, j->dx16 + (size_t)i * (kpad / 16),
                   j->c16 + (size_t)i * (kpad / 16), j->y + (size_t)i * rows);
    }
    i0 += mb;
  }
}

const DenseVariant denseAvx512 = {"avx512", quantizeRow, roundRow, computeRows};
