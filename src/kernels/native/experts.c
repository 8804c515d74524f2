// Tessera's routed-expert kernel: one call runs a whole MoE layer's chosen experts (Qwen3-MoE,
// GLM-4.5's routed part) straight on the GGUF's 3-D expert tensors in GGML's own block layout
// (q4_0: f16 d + 16 bytes of nibbles, elements 0..15 low, 16..31 high; q8_0: f16 d + 32 int8;
// q4_K and q6_K super-blocks: experts-kquant.c), read where they lie (the read-only file map, or
// the file's buffer), never repacked or copied. experts-native.ts is its TypeScript side;
// forward/moe.ts calls it after routing.
//
//   1. every token's row x quantized as llama.cpp's CPU backend quantizes it for these weights
//      (Q8_0 per 32, the scale rounded to f16: dense-avx2.c's quantizeNatural, same arithmetic;
//      Q8_K per 256 for K-quants);
//   2. the (token, choice) slots grouped by expert (counting sort, token order kept);
//   3. one shared pass over every chosen expert's gate and up rows (rows of all the step's
//      experts, flattened: one hand-out to the helper threads for the whole layer, not two per
//      expert), each row dotted with its group's tokens TILE at a time: every block's codes are
//      loaded and decoded once per tile, not once per token;
//   4. per slot silu(gate) * up (ggml's silu: x / (1 + e^-x)), quantized for the down rows
//      (shared with the helpers from SHARE_HIDDEN_SLOTS slots);
//   5. one shared pass over every chosen expert's down rows, tiled as 3;
//   6. out[t] = sum_j weight[t, j] * y[t, j], j in the order chosen (llama.cpp's build_moe_ffn).
// A dot is llama.cpp's AVX2 q4_0 x q8_0 (q8_0 x q8_0) loop: per block the exact integer
// sum of (code - 8) * q (vpmaddubsw, vpmaddwd), widened to f32 and added by one FMA with
// d_w * d_x into eight lanes, summed at the end as its hsum_float_8. Every row's arithmetic is
// its own: a token's result does not depend on the other tokens of the step or of its tile
// (batch-invariant), nor on which thread computed it. Compiled with AVX2 + FMA + F16C (both addon
// variants have them) and -ffp-contract=off (only the FMAs written here are fused).
#include <immintrin.h>
#include <math.h>
#include <node_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dense.h"
#include "experts.h"
#include "napi-args.h"

// Bytes per chunk of rows handed out (as dense.c's chunks: long runs keep the prefetchers on).
#define CHUNK_BYTES (128 * 1024)

// x[0, n) (n a multiple of 32) as Q8_0: q[n] in element order, d[n / 32] (f16-rounded), and for
// the VNNI q4_0 dot, off[n / 4]: -8 times each 4-group's sum (int32 lane i of a block's 8 holds
// -8 (q[4i] + .. + q[4i + 3])), so one vpdpbusd from it gives the exact sum of (code - 8) q.
static void quantizeQ8(const float* x, int n, int8_t* q, float* d, int32_t* off) {
  for (int g = 0; g < n / 32; g++) {
    const float* src = x + 32 * g;
    float amax = expertsAbsMax(src, 32);
    d[g] = _cvtsh_ss(_cvtss_sh(amax / 127.0f, _MM_FROUND_TO_NEAREST_INT));
    const __m256 idv = _mm256_set1_ps(amax != 0 ? 127.0f / amax : 0.0f);
    for (int v = 0; v < 32; v += 16) {
      __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(src + v), idv));
      __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(src + v + 8), idv));
      __m256i p = _mm256_packs_epi32(a, b);  // lanes: a0-3 b0-3 | a4-7 b4-7
      p = _mm256_permute4x64_epi64(p, 0xD8);
      __m128i w = _mm_packs_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
      _mm_storeu_si128((__m128i*)(q + 32 * g + v), w);
    }
    for (int i = 0; i < 8; i++) {
      const int8_t* p = q + 32 * g + 4 * i;
      off[8 * g + i] = -8 * (p[0] + p[1] + p[2] + p[3]);
    }
  }
}

// llama.cpp's hsum_float_8.
static inline float hsum8(__m256 x) {
  __m128 r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

// The 32 4-bit codes of a q4_0 block as bytes, elements 0..15 then 16..31.
static inline __m256i q40Codes(const uint8_t* blk) {
  const __m128i m4 = _mm_set1_epi8(15);
  __m128i raw = _mm_loadu_si128((const __m128i*)(blk + 2));
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), _mm_and_si128(raw, m4));
}

#define VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define INLINE static inline __attribute__((always_inline))

// Block b of a q4_0 / q8_0 row against NT tokens, AVX-512 VNNI (256-bit vpdpbusd): the block's
// codes and d_w decoded once; per token the exact integer sum, widened to f32 and added by one FMA
// with d_w * d_x into its eight lanes.
VNNI_TARGET INLINE void blockVnni(int kind, const uint8_t* w, const XRow* x, int b, __m256* acc, const int NT) {
  if (kind == K_Q4_0) {
    const uint8_t* blk = w + 18 * (size_t)b;
    const __m256i codes = q40Codes(blk);
    const float dw = _cvtsh_ss(rd16(blk));
    for (int t = 0; t < NT; t++) {
      __m256i sum = _mm256_dpbusd_epi32(_mm256_loadu_si256((const __m256i*)(x[t].aux + 8 * b)), codes,
                                        _mm256_loadu_si256((const __m256i*)(x[t].q + 32 * b)));
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x[t].d[b]), _mm256_cvtepi32_ps(sum), acc[t]);
    }
    return;
  }
  const uint8_t* blk = w + 34 * (size_t)b;
  const __m256i wv = _mm256_loadu_si256((const __m256i*)(blk + 2)), wabs = _mm256_sign_epi8(wv, wv);
  const float dw = _cvtsh_ss(rd16(blk));
  for (int t = 0; t < NT; t++) {
    __m256i xq = _mm256_loadu_si256((const __m256i*)(x[t].q + 32 * b));
    __m256i sum = _mm256_dpbusd_epi32(_mm256_setzero_si256(), wabs, _mm256_sign_epi8(xq, wv));
    acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x[t].d[b]), _mm256_cvtepi32_ps(sum), acc[t]);
  }
}

// The same integer sums with vpmaddubsw + vpmaddwd (AVX2): the same bits.
INLINE void blockAvx2(int kind, const uint8_t* w, const XRow* x, int b, __m256* acc, const int NT) {
  const __m256i ones = _mm256_set1_epi16(1);
  if (kind == K_Q4_0) {
    const uint8_t* blk = w + 18 * (size_t)b;
    const __m256i codes = q40Codes(blk), eights = _mm256_set1_epi8(8);
    const float dw = _cvtsh_ss(rd16(blk));
    for (int t = 0; t < NT; t++) {
      __m256i xq = _mm256_loadu_si256((const __m256i*)(x[t].q + 32 * b));
      __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(codes, xq), _mm256_maddubs_epi16(eights, xq));
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x[t].d[b]), _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones)), acc[t]);
    }
    return;
  }
  const uint8_t* blk = w + 34 * (size_t)b;
  const __m256i wv = _mm256_loadu_si256((const __m256i*)(blk + 2)), wabs = _mm256_sign_epi8(wv, wv);
  const float dw = _cvtsh_ss(rd16(blk));
  for (int t = 0; t < NT; t++) {
    __m256i xq = _mm256_loadu_si256((const __m256i*)(x[t].q + 32 * b));
    __m256i p = _mm256_maddubs_epi16(wabs, _mm256_sign_epi8(xq, wv));
    acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x[t].d[b]), _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones)), acc[t]);
  }
}

// One GGML row of nb blocks . NT Q8_0 rows: even blocks into one accumulator per token, odd into
// another (one FMA chain was bound by its latency), their sum at the end (llama.cpp's hsum).
#define TILE_BODY(BLOCK)                                                         \
  __m256 a0[TILE], a1[TILE];                                                     \
  for (int t = 0; t < NT; t++) a0[t] = a1[t] = _mm256_setzero_ps();              \
  int b = 0;                                                                     \
  for (; b + 1 < nb; b += 2) {                                                   \
    BLOCK(kind, w, x, b, a0, NT);                                                \
    BLOCK(kind, w, x, b + 1, a1, NT);                                            \
  }                                                                              \
  if (b < nb) BLOCK(kind, w, x, b, a0, NT);                                      \
  for (int t = 0; t < NT; t++) out[t] = hsum8(_mm256_add_ps(a0[t], a1[t]));
VNNI_TARGET INLINE void tileVnni(int kind, const uint8_t* w, const XRow* x, int nb, float* out, const int NT) {
  TILE_BODY(blockVnni)
}
INLINE void tileAvx2(int kind, const uint8_t* w, const XRow* x, int nb, float* out, const int NT) {
  TILE_BODY(blockAvx2)
}
#undef TILE_BODY

VNNI_TARGET static void dotTileVnni(int kind, const uint8_t* w, const XRow* x, int n, int nb, float* out) {
  switch (n) {
    case 1: tileVnni(kind, w, x, nb, out, 1); break;
    case 2: tileVnni(kind, w, x, nb, out, 2); break;
    case 3: tileVnni(kind, w, x, nb, out, 3); break;
    default: tileVnni(kind, w, x, nb, out, 4); break;
  }
}
static void dotTileAvx2(int kind, const uint8_t* w, const XRow* x, int n, int nb, float* out) {
  switch (n) {
    case 1: tileAvx2(kind, w, x, nb, out, 1); break;
    case 2: tileAvx2(kind, w, x, nb, out, 2); break;
    case 3: tileAvx2(kind, w, x, nb, out, 3); break;
    default: tileAvx2(kind, w, x, nb, out, 4); break;
  }
}

static inline int isK(int kind) { return kind == K_Q4_K || kind == K_Q6_K; }

// out[t] = one row of `cols` weights . x[t], t < n <= TILE; every kind gives the same bits per
// token whatever n (VNNI and AVX2 alike).
static inline void dotTile(int vnni, int kind, const uint8_t* w, const XRow* x, int n, int cols, float* out) {
  if (isK(kind))
    expertsDotTileK(kind, w, x, n, cols / 256, out);
  else if (vnni)
    dotTileVnni(kind, w, x, n, cols / 32, out);
  else
    dotTileAvx2(kind, w, x, n, cols / 32, out);
}

// ggml's silu(g) * u, one element.
static inline float siluMul(float g, float u) { return g / (1.0f + expf(-g)) * u; }

typedef struct {
  int kind, kindDown, E, f, d, T, k, groups, vnni;
  const uint8_t *gate, *up, *down;
  size_t gateRow, downRow;  // bytes per row
  const int* groupExpert;   // [groups]
  const int* groupStart;    // [groups + 1], into order
  const int* order;         // slots, grouped by expert
  const int8_t* xq;         // [T, d]
  const float* xd;          // [T, d / 32] (Q8_K: d / 256 used)
  const int32_t* xo;        // [T, d / 4] (Q8_K: d / 16 used)
  int32_t* ho;              // [T k, f / 4] (Q8_K: f / 16 used)
  float* gu;                // [T k, 2 f]: gate | up per slot
  int8_t* hq;               // [T k, f]
  float* hd;                // [T k, f / 32]
  float* ys;                // [T k, d]
} ExpertJob;

// The bytes PREFETCH_ROWS rows after this one (rows of one expert lie end to end; past the end of
// a stack a prefetch is harmless): without it, rows read from a file's 4 KiB pages ran at half
// the speed of the same rows repacked onto huge pages.
#define PREFETCH_AHEAD 2048
static inline void prefetchAhead(const uint8_t* row, size_t rowBytes) {
  const uint8_t* at = row + PREFETCH_AHEAD;
  for (size_t o = 0; o < rowBytes; o += 64) _mm_prefetch((const char*)(at + o), _MM_HINT_T0);
}

// Bytes of one row of `cols` weights of `kind`.
static size_t rowBytes(int kind, int cols) {
  switch (kind) {
    case K_Q4_0: return (size_t)(cols / 32) * 18;
    case K_Q8_0: return (size_t)(cols / 32) * 34;
    case K_Q4_K: return (size_t)(cols / 256) * 144;
    default: return (size_t)(cols / 256) * 210;  // K_Q6_K
  }
}

// x[0, n) quantized as llama.cpp quantizes the activations of `kind` weights: Q8_0 (q, d per 32,
// the VNNI q4_0 offsets per 4) or Q8_K (q, d per 256, the sums per 16).
static void quantizeFor(int kind, const float* x, int n, int8_t* q, float* d, int32_t* aux) {
  if (isK(kind))
    expertsQuantizeQ8K(x, n, q, d, aux);
  else
    quantizeQ8(x, n, q, d, aux);
}

// Rows dotted with their group's slots, TILE at a time: each block read and decoded once per tile.
static void rowTiles(const ExpertJob* j, int kind, const uint8_t* row, int cols, int g, int rowIndex, int isDown) {
  const int s0 = j->groupStart[g], s1 = j->groupStart[g + 1], R = 2 * j->f;
  for (int s = s0; s < s1; s += TILE) {
    const int n = s1 - s < TILE ? s1 - s : TILE;
    XRow xr[TILE];
    float res[TILE];
    for (int i = 0; i < n; i++) {
      const int slot = j->order[s + i], t = isDown ? slot : slot / j->k;
      const int8_t* q = isDown ? j->hq : j->xq;
      const float* dd = isDown ? j->hd : j->xd;
      const int32_t* aux = isDown ? j->ho : j->xo;
      xr[i] = (XRow){q + (size_t)t * cols, dd + (size_t)t * (cols / 32), aux + (size_t)t * (cols / 4)};
    }
    dotTile(j->vnni, kind, row, xr, n, cols, res);
    for (int i = 0; i < n; i++) {
      const int slot = j->order[s + i];
      if (isDown)
        j->ys[(size_t)slot * j->d + rowIndex] = res[i];
      else
        j->gu[(size_t)slot * R + rowIndex] = res[i];
    }
  }
}

// Items [i0, i1) of the gate | up pass: item = group * 2f + r (r < f: gate row r, else up row r - f).
static int gateUpChunk(void* ctx, int i0, int i1) {
  const ExpertJob* j = ctx;
  const int R = 2 * j->f;
  for (int i = i0; i < i1; i++) {
    int g = i / R, r = i % R, e = j->groupExpert[g];
    const uint8_t* row = (r < j->f ? j->gate + ((size_t)e * j->f + r) * j->gateRow
                                   : j->up + ((size_t)e * j->f + (r - j->f)) * j->gateRow);
    prefetchAhead(row, j->gateRow);
    rowTiles(j, j->kind, row, j->d, g, r, 0);
  }
  return 1;
}

// Slots [i0, i1): hidden = silu(gate) * up (in the gate's place), quantized for the down rows.
static int hiddenChunk(void* ctx, int i0, int i1) {
  const ExpertJob* j = ctx;
  const int f = j->f;
  for (int s = i0; s < i1; s++) {
    float* g = j->gu + (size_t)s * 2 * f;
    for (int i = 0; i < f; i++) g[i] = siluMul(g[i], g[f + i]);
    quantizeFor(j->kindDown, g, f, j->hq + (size_t)s * f, j->hd + (size_t)s * (f / 32),
                j->ho + (size_t)s * (f / 4));
  }
  return 1;
}

// Items [i0, i1) of the down pass: item = group * d + r.
static int downChunk(void* ctx, int i0, int i1) {
  const ExpertJob* j = ctx;
  for (int i = i0; i < i1; i++) {
    int g = i / j->d, r = i % j->d, e = j->groupExpert[g];
    const uint8_t* row = j->down + ((size_t)e * j->d + r) * j->downRow;
    prefetchAhead(row, j->downRow);
    rowTiles(j, j->kindDown, row, j->f, g, r, 1);
  }
  return 1;
}

// This thread's scratch (an engine thread's; helpers only read and write through the job).
static _Thread_local void* scratch;
static _Thread_local size_t scratchCap;

static int perChunk(size_t rowBytes, int items, int threads) {
  size_t per = CHUNK_BYTES / rowBytes;
  size_t fair = (size_t)items / (4 * (size_t)threads);  // at least ~4 chunks a thread
  if (fair < per) per = fair;
  return per < 4 ? 4 : (int)per;
}

// Slots from which step 4 is shared with the helpers (below it a hand-out costs more than it saves).
#define SHARE_HIDDEN_SLOTS 16

// 0 when the scratch cannot be had.
static int runExperts(int kind, int kindDown, const uint8_t* gate, const uint8_t* up, const uint8_t* down, int E,
                      int f, int d, const float* x, int T, int k, const int* ids, const float* weights, float* out,
                      int helpers) {
  const int S = T * k;
  size_t need = 0;
#define CARVE(bytes) (need = (need + 63) / 64 * 64, need += (bytes), need - (bytes))
  size_t oStart = CARVE((size_t)(E + 1) * 4), oCursor = CARVE((size_t)E * 4), oOrder = CARVE((size_t)S * 4);
  size_t oGroupE = CARVE((size_t)E * 4), oGroupS = CARVE((size_t)(E + 1) * 4);
  size_t oXq = CARVE((size_t)T * d), oXd = CARVE((size_t)T * (d / 32) * 4);
  size_t oGu = CARVE((size_t)S * 2 * f * 4), oHq = CARVE((size_t)S * f), oHd = CARVE((size_t)S * (f / 32) * 4);
  size_t oYs = CARVE((size_t)S * d * 4);
  size_t oXo = CARVE((size_t)T * d), oHo = CARVE((size_t)S * f);  // int32 per 4 values
#undef CARVE
  if (need > scratchCap) {
    free(scratch);
    scratch = aligned_alloc(64, (need + 63) / 64 * 64);
    scratchCap = scratch ? need : 0;
    if (!scratch) return 0;
  }
  uint8_t* base = scratch;
  int *start = (int*)(base + oStart), *cursor = (int*)(base + oCursor), *order = (int*)(base + oOrder);
  int *groupE = (int*)(base + oGroupE), *groupS = (int*)(base + oGroupS);
  // 2. counting sort of the slots by expert.
  memset(start, 0, (size_t)(E + 1) * 4);
  for (int s = 0; s < S; s++) start[ids[s] + 1]++;
  for (int e = 0; e < E; e++) start[e + 1] += start[e];
  memcpy(cursor, start, (size_t)E * 4);
  for (int s = 0; s < S; s++) order[cursor[ids[s]]++] = s;
  int groups = 0;
  for (int e = 0; e < E; e++)
    if (start[e + 1] > start[e]) {
      groupE[groups] = e;
      groupS[groups++] = start[e];
    }
  groupS[groups] = S;
  ExpertJob j = {.kind = kind, .kindDown = kindDown, .E = E, .f = f, .d = d, .T = T, .k = k, .groups = groups,
                 .gate = gate, .up = up, .down = down, .gateRow = rowBytes(kind, d), .downRow = rowBytes(kindDown, f),
                 .groupExpert = groupE, .groupStart = groupS, .order = order, .xq = (int8_t*)(base + oXq),
                 .xd = (float*)(base + oXd), .gu = (float*)(base + oGu), .hq = (int8_t*)(base + oHq),
                 .hd = (float*)(base + oHd), .ys = (float*)(base + oYs), .xo = (int32_t*)(base + oXo),
                 .ho = (int32_t*)(base + oHo), .vnni = tesseraVariant() == 0};
  // 1. x quantized.
  for (int t = 0; t < T; t++)
    quantizeFor(kind, x + (size_t)t * d, d, (int8_t*)j.xq + (size_t)t * d, (float*)j.xd + (size_t)t * (d / 32),
                (int32_t*)j.xo + (size_t)t * (d / 4));
  const int threads = tesseraThreads();
  // 3. gate | up of every chosen expert.
  int items = groups * 2 * f;
  tesseraShare(gateUpChunk, &j, items, perChunk(j.gateRow, items, threads), helpers);
  // 4. hidden = silu(gate) * up, quantized (per slot: the same bits whoever computes it).
  if (S >= SHARE_HIDDEN_SLOTS && helpers)
    tesseraShare(hiddenChunk, &j, S, (S + 2 * threads - 1) / (2 * threads), helpers);
  else
    hiddenChunk(&j, 0, S);
  // 5. down of every chosen expert.
  items = groups * d;
  tesseraShare(downChunk, &j, items, perChunk(j.downRow, items, threads), helpers);
  // 6. each token's mixture, in the order chosen.
  for (int t = 0; t < T; t++) {
    float* row = out + (size_t)t * d;
    for (int c = 0; c < k; c++) {
      const float w = weights[t * k + c];
      const float* y = j.ys + (size_t)(t * k + c) * d;
      if (c == 0)
        for (int i = 0; i < d; i++) row[i] = w * y[i];
      else
        for (int i = 0; i < d; i++) row[i] = row[i] + w * y[i];
    }
  }
  return 1;
}

// ---------------------------------------------------------------- Node-API glue
// A kind read in place whose blocks divide `cols`.
static int kindFits(int kind, int cols) {
  if (kind == K_Q4_0 || kind == K_Q8_0) return cols % 32 == 0;
  return (kind == K_Q4_K || kind == K_Q6_K) && cols % 256 == 0;
}

// experts(kind, kindDown, gate, up, down: Uint8Array, E, f, d, x: Float32Array, T, k,
//         ids: Int32Array, weights: Float32Array, out: Float32Array, helpers: 0 | 1):
// out[T, d] = the mixture of each token's k chosen experts (ids, weights [T, k]) over x[T, d];
// gate, up [E, f, d] (kind) and down [E, d, f] (kindDown) in GGML's layout: K_Q4_0, K_Q8_0,
// K_Q4_K or K_Q6_K. Every size and id is checked here: a bad one throws with nothing written.
napi_value tesseraExperts(napi_env env, napi_callback_info info) {
  size_t argc = 15;
  napi_value argv[15];
  int kind, kindDown, E, f, d, T, k, helpers;
  void *gate, *up, *down, *x, *ids, *weights, *out;
  size_t gateN, upN, downN, xN, idsN, weightsN, outN;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 15 || !napiInt32(env, argv[0], &kind) ||
      !napiInt32(env, argv[1], &kindDown) || !napiTyped(env, argv[2], napi_uint8_array, &gate, &gateN) ||
      !napiTyped(env, argv[3], napi_uint8_array, &up, &upN) || !napiTyped(env, argv[4], napi_uint8_array, &down, &downN) ||
      !napiInt32(env, argv[5], &E) || !napiInt32(env, argv[6], &f) || !napiInt32(env, argv[7], &d) ||
      !napiTyped(env, argv[8], napi_float32_array, &x, &xN) || !napiInt32(env, argv[9], &T) ||
      !napiInt32(env, argv[10], &k) || !napiTyped(env, argv[11], napi_int32_array, &ids, &idsN) ||
      !napiTyped(env, argv[12], napi_float32_array, &weights, &weightsN) ||
      !napiTyped(env, argv[13], napi_float32_array, &out, &outN) || !napiInt32(env, argv[14], &helpers) || E <= 0 ||
      f <= 0 || d <= 0 || !kindFits(kind, d) || !kindFits(kindDown, f) || T < 0 || k <= 0 || k > E) {
    napi_throw_type_error(
        env, NULL, "experts(kind, kindDown, gate, up, down, E, f, d, x, T, k, ids, weights, out, helpers): bad arguments");
    return NULL;
  }
  size_t expert = (size_t)f * rowBytes(kind, d), expertDown = (size_t)d * rowBytes(kindDown, f);
  if (gateN != E * expert || upN != E * expert || downN != E * expertDown || xN < (size_t)T * d ||
      idsN < (size_t)T * k || weightsN < (size_t)T * k || outN < (size_t)T * d) {
    napi_throw_range_error(env, NULL, "experts: a weight or array has the wrong size");
    return NULL;
  }
  for (size_t s = 0; s < (size_t)T * k; s++)
    if (((const int*)ids)[s] < 0 || ((const int*)ids)[s] >= E) {
      napi_throw_range_error(env, NULL, "experts: an expert id is out of range");
      return NULL;
    }
  if (tesseraVariant() < 0) {
    napi_throw_error(env, NULL, "experts: this CPU has neither AVX-512 nor AVX2 + FMA + F16C");
    return NULL;
  }
  if (T > 0 && !runExperts(kind, kindDown, gate, up, down, E, f, d, x, T, k, ids, weights, out, helpers)) {
    napi_throw_error(env, NULL, "experts: out of memory for the scratch");
    return NULL;
  }
  return NULL;
}
