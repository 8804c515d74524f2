// Tessera's native paged attention: causal attention with GQA and an optional sliding window for
// one request in one layer, over an f32, f16 or q8_0 KV pool, the same sums as the wasm kernel's
// (src/kernels/wasm/assembly/attention.ts) with sixteen lanes (attention-avx512.c) or eight
// (attention-avx2.c) instead of four: the variant dense.c chose. This file, the checks and the
// glue, is compiled for baseline x86-64. Part of the addon dense.c builds (jsAttention is
// registered there); native-ops.ts is its TypeScript side.
//
// It reads K and V only through the page table it is given, only positions [lo, startPos + t]
// for query token t (lo: 0, or the window's first), and only pages inside the pool: every page
// number it will use is checked against the pool's size before anything is read, and a call
// with one outside fails whole (RangeError) with nothing written. It never checks ownership (the
// runner did). Each (token, head) is computed by the same arithmetic whatever numTokens is, and
// whichever thread computes it (a call's (token, KV head) items may be shared with dense.c's
// helper threads, each item whole on one), so chunked prefill and decode, threaded or not, give
// bit-identical outputs; an f16 pool's halves are promoted to f32
// exactly (vcvtph2ps) before any sum, by the same code, so f16 attention equals f32 attention
// over the promoted values bit for bit. A q8_0 pool (a Uint8Array; core/kv-view.ts's Q8_0 LAYOUT:
// per head, blocks of an f16 scale d and 32 int8 qs) is read as d * qs: each block's int8 values
// are widened to f32 in registers (vpmovsxbd + vcvtdq2ps), dotted with q (K) or accumulated
// weighted by score * d (V), with one scale multiply per block of K; nothing is dequantized to
// memory, so a 2k context reads ~1/4 of an f32 pool's bytes.
//
//   pool layout (page-major, see src/pages/kv-layout.ts), e = 4 (f32) or 2 (f16) bytes:
//     pool[(((page * numLayers + layer) * 2 + kv) * pageSize + slot) * kvDim + i]
//   q8_0: rows of numKvHeads * headBytes bytes, headBytes = headDim + 2 * ceil(headDim / 32),
//     in place of kvDim elements; value i of a head: block i / 32 at 34 * (i / 32) bytes into it.
#include <math.h>
#include <node_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "dense.h"
#include "napi-args.h"

// Per-thread scores scratch, grown as needed (the caller's and each helper thread's).
static _Thread_local float* scoreBuf;
static _Thread_local size_t scoreCap;

// This thread's scratch of at least `need` floats, or NULL when it cannot be had (attention.h).
float* attentionScratch(size_t need) {
  if (need > scoreCap) {
    free(scoreBuf);
    scoreBuf = aligned_alloc(64, (need * 4 + 63) / 64 * 64);
    scoreCap = scoreBuf != NULL ? need : 0;
  }
  return scoreBuf;
}

// ---------------------------------------------------------------- work items
// A call's work is split into items (token t, KV head kvh), item t * numKvHeads + kvh: every
// query head reading kvh, whole (scores, softmax, weighted V), by the one thread that took the
// item. No sum crosses items, so the output is bit-identical however the items are shared out
// (dense.c's tesseraShare: the caller and the helper threads) and in whatever order they run;
// a KV head's rows, read once per query head of its group, stay in that thread's cache.
static int attendItems(void* ctx, int i0, int i1) {
  const Attn* a = (const Attn*)ctx;
  float* s = attentionScratch(runScratchFloats(a));
  if (s == NULL) return 0;
  attendRange(a, i0, i1, s);
  return 1;
}

// Items [i0, i1) of one call: a token's KV heads in runs of up to GROUP_RUN_MAX on the AVX-512
// variant where it takes the shape (attendGroupsAvx512: the same bits), else one by one.
void attendRange(const Attn* a, int i0, int i1, float* scratch) {
  for (int i = i0; i < i1;) {
    const int t = i / a->numKvHeads, kvh = i % a->numKvHeads;
    const int left = (t + 1) * a->numKvHeads < i1 ? (t + 1) * a->numKvHeads - i : i1 - i;
    const int run = left < GROUP_RUN_MAX ? left : GROUP_RUN_MAX;
    if (!a->avx2 && run > 1 && attendGroupsAvx512(a, t, kvh, kvh + run, scratch)) {
      i += run;
      continue;
    }
    attendItem(a, t, kvh, scratch);
    i++;
  }
}

// Items a thread takes at a time: a token's KV heads shared evenly between the threads (so that
// runs form), or about 32 chunks per thread for a call of many tokens.
int attentionChunk(long items, int numKvHeads) {
  const int threads = tesseraThreads();
  const int byItems = 1 + (int)(items / (32 * threads));
  const int byHeads = numKvHeads / threads < GROUP_RUN_MAX ? numKvHeads / threads : GROUP_RUN_MAX;
  return byItems > byHeads ? byItems : byHeads > 1 ? byHeads : 1;
}

// One item (attention.h): every query head of KV head kvh at token t, on the variant's kernel.
void attendItem(const Attn* a, int t, int kvh, float* scratch) {
  if (!a->avx2) {
    attendGroupAvx512(a, t, kvh, scratch);
    return;
  }
  int h0, h1;
  groupHeads(a, kvh, &h0, &h1);
  for (int h = h0; h < h1; h++) attendHeadAvx2(a, t, h, scratch);
}

// A call shares its items with the helper threads (when asked) only when it has at least this
// many query-position x head-dimension products: below it (a short context) waking a helper
// costs about what the work does.
#define SHARE_MIN_WORK (64 * 1024)

float sinkTerm(const Attn* a, int h, float max) { return a->sinks == NULL ? 0.0f : expf(a->sinks[h] - max); }


// ---------------------------------------------------------------- Node-API glue
// attention(pool: Float32Array | Uint16Array (f16) | Uint8Array (q8_0), numLayers, pageSize, numKvHeads, headDim, layer,
//   pageTable: Int32Array, q: Float32Array, out: Float32Array, numTokens, startPos, numHeads,
//   scale, window, helpers: 0 | 1, sinks: Float32Array | null): out[t, h] for t < numTokens, h < numHeads
//   (window 0: none), with dense.c's helper threads taking work items when helpers is 1 (the result is
//   the same); sinks (gpt-oss): one logit per head in each softmax's max and denominator.
napi_value tesseraAttention(napi_env env, napi_callback_info info) {
  size_t argc = 16;
  napi_value argv[16];
  int helpers;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 16) {
    napi_throw_type_error(env, NULL, "attention: 16 arguments");
    return NULL;
  }
  Attn a;
  void *pool, *table, *q, *out;
  size_t poolLen, tableLen, qLen, outLen;
  double scale;
  napi_typedarray_type poolType;
  napi_value ab;
  size_t offset;
  if (napi_get_typedarray_info(env, argv[0], &poolType, &poolLen, &pool, &ab, &offset) != napi_ok ||
      (poolType != napi_float32_array && poolType != napi_uint16_array && poolType != napi_uint8_array) || !napiInt32(env, argv[1], &a.numLayers) ||
      !napiInt32(env, argv[2], &a.pageSize) || !napiInt32(env, argv[3], &a.numKvHeads) || !napiInt32(env, argv[4], &a.headDim) ||
      !napiInt32(env, argv[5], &a.layer) || !napiTyped(env, argv[6], napi_int32_array, &table, &tableLen) ||
      !napiTyped(env, argv[7], napi_float32_array, &q, &qLen) || !napiTyped(env, argv[8], napi_float32_array, &out, &outLen) ||
      !napiInt32(env, argv[9], &a.numTokens) || !napiInt32(env, argv[10], &a.startPos) ||
      !napiInt32(env, argv[11], &a.numHeads) || napi_get_value_double(env, argv[12], &scale) != napi_ok ||
      !napiInt32(env, argv[13], &a.window) || !napiInt32(env, argv[14], &helpers)) {
    napi_throw_type_error(env, NULL,
                          "attention(pool, numLayers, pageSize, numKvHeads, headDim, layer, pageTable, q, out, "
                          "numTokens, startPos, numHeads, scale, window, helpers, sinks): bad arguments");
    return NULL;
  }
  void* sinks = NULL;
  size_t sinksLen = 0;
  napi_valuetype sinksType;
  if (napi_typeof(env, argv[15], &sinksType) != napi_ok ||
      (sinksType != napi_null && !napiTyped(env, argv[15], napi_float32_array, &sinks, &sinksLen))) {
    napi_throw_type_error(env, NULL,
                          "attention(pool, numLayers, pageSize, numKvHeads, headDim, layer, pageTable, q, out, "
                          "numTokens, startPos, numHeads, scale, window, helpers, sinks): sinks must be a Float32Array or null");
    return NULL;
  }
  if (a.numLayers <= 0 || a.pageSize <= 0 || a.numKvHeads <= 0 || a.headDim <= 0 || a.layer < 0 ||
      a.layer >= a.numLayers || a.numTokens < 0 || a.startPos < 0 || a.numHeads < a.numKvHeads || a.window < 0 ||
      (long)a.startPos + a.numTokens > 0x7FFFFFFF || (long)a.numTokens * a.numKvHeads > 0x7FFFFFFF) {
    napi_throw_range_error(env, NULL, "attention: bad shape or range");
    return NULL;
  }
  size_t qDim = (size_t)a.numHeads * a.headDim, end = (size_t)a.startPos + a.numTokens;
  const int q8 = poolType == napi_uint8_array;
  // Units of the pool (elements, q8_0: bytes) per KV head's row and per page.
  size_t headUnits = q8 ? (size_t)a.headDim + 2 * (((size_t)a.headDim + 31) / 32) : (size_t)a.headDim;
  size_t pageElems = (size_t)a.numLayers * 2 * a.pageSize * a.numKvHeads * headUnits;
  size_t poolPages = poolLen / pageElems, pages = (end + a.pageSize - 1) / a.pageSize;
  if (qLen < a.numTokens * qDim || outLen < a.numTokens * qDim || tableLen < pages ||
      (sinks != NULL && sinksLen < (size_t)a.numHeads)) {
    napi_throw_range_error(env, NULL, "attention: q, out, the page table or the sinks are too short");
    return NULL;
  }
  // Every page the call can read, inside the pool (the window only ever reads fewer).
  for (size_t p = 0; p < pages; p++) {
    int32_t page = ((const int32_t*)table)[p];
    if (page < 0 || (size_t)page >= poolPages) {
      napi_throw_range_error(env, NULL, "attention: a page table entry is outside the pool");
      return NULL;
    }
  }
  if (a.numTokens == 0) return NULL;
  if (tesseraVariant() < 0) {
    napi_throw_error(env, NULL, "attention: this CPU has neither AVX-512 nor AVX2 + FMA + F16C");
    return NULL;
  }
  if (attentionScratch(runScratchFloats(&a)) == NULL) {
    napi_throw_error(env, NULL, "attention: out of memory for the scores");
    return NULL;
  }
  a.pool = (const uint8_t*)pool;
  a.f16 = poolType == napi_uint16_array;
  a.q8 = q8;
  size_t unitBytes = q8 ? 1 : a.f16 ? 2 : 4;
  a.headBytes = headUnits * unitBytes;
  a.rowBytes = (size_t)a.numKvHeads * a.headBytes;
  a.pageTable = (const int32_t*)table;
  a.q = (const float*)q;
  a.out = (float*)out;
  a.scale = (float)scale;
  a.sinks = (const float*)sinks;
  a.avx2 = tesseraVariant() == 1;
  // Positions each token reads (the last token's, at most the window) x heads x head dimension.
  const double positions = a.window > 0 && (size_t)a.window < end ? a.window : (double)end;
  const int items = a.numTokens * a.numKvHeads;
  const int share = helpers == 1 && (double)a.numTokens * positions * qDim >= SHARE_MIN_WORK;
  // A chunk of items: a decode step's KV heads shared between the threads; ~32 chunks per thread
  // for a prefill chunk.
  const int per = attentionChunk(items, a.numKvHeads);
  if (!tesseraShare(attendItems, &a, items, per, share)) {
    napi_throw_error(env, NULL, "attention: out of memory for a helper thread's scores (the output is incomplete)");
    return NULL;
  }
  return NULL;
}
