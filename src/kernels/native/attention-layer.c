// One layer's attention for every sequence of a step in one call (attendLayer): RoPE of the
// step's q and k rows, this step's K and V written into each sequence's pages of an f32 pool, and
// paged attention for every (sequence, token, KV head) item, those items shared with dense.c's
// helper threads as one job. It replaces, per layer, two RoPE calls and a KV write and an attention
// call per sequence (each attention call a hand-off to the helpers of its own): a serving step of
// 16 decodes made 16 such hand-offs per layer for 4 items each.
//
// The same bits as those calls, by construction: RoPE is the wasm kernel's arithmetic
// (src/kernels/wasm/assembly/ops.ts: a' = a c - b s, b' = b c + a s, each product and sum rounded
// to f32, no fused multiply-add: this file is compiled for baseline x86-64 with -ffp-contract=off)
// over the cos / sin table the wasm kernel computes (the caller passes it: [T, headDim], cos in
// the first half of a row, sin in the second); the K and V rows are copied as writeKv copies them;
// every attention item runs attention.c's kernel (attendGroupAvx512 / attendHeadAvx2) on an Attn
// that describes its own sequence exactly as a call for that sequence alone would.
//
// Checks before anything is written: the shapes, every sequence's rows inside the step, its page
// table covering its positions and inside the table array, and every page number it uses inside
// the pool; a call that fails any throws (RangeError / TypeError) with nothing written.
#include <node_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "dense.h"
#include "napi-args.h"

typedef struct {
  const Attn* seqs;       // one per sequence, each as a call for it alone would have it
  const int* itemStart;   // [numSeqs + 1]: the first item of each sequence
  int numSeqs;
  size_t scratch;         // floats of scratch the largest item needs
} LayerJob;

static int layerItems(void* ctx, int i0, int i1) {
  const LayerJob* j = (const LayerJob*)ctx;
  float* s = attentionScratch(j->scratch);
  if (s == NULL) return 0;
  int seq = 0;
  for (int i = i0; i < i1;) {
    while (i >= j->itemStart[seq + 1]) seq++;
    const int end = i1 < j->itemStart[seq + 1] ? i1 : j->itemStart[seq + 1];
    attendRange(&j->seqs[seq], i - j->itemStart[seq], end - j->itemStart[seq], s);
    i = end;
  }
  return 1;
}

// The wasm kernel's rotation of one head (x: hd floats) by one token's table (cs: cos | sin), into dst.
static void rotate(const float* x, const float* cs, int hd, float* dst) {
  const int half = hd >> 1;
  const float *c = cs, *s = cs + half;
  for (int i = 0; i < half; i++) {
    const float a = x[i], b = x[i + half];
    const float ac = a * c[i], bs = b * s[i], bc = b * c[i], as = a * s[i];
    dst[i] = ac - bs;
    dst[i + half] = bc + as;
  }
}

#define SHARE_MIN_WORK (64 * 1024)
#define MAX_SEQS 4096

// attendLayer(pool: Float32Array, numLayers, pageSize, numKvHeads, headDim, layer, qkv: Float32Array
//   [T, qDim + 2 kvDim], numTokens T, numHeads, scale, cosSin: Float32Array [T, headDim],
//   seqs: Int32Array [numSeqs, 4] (first row, tokens, start position, offset of its page table in
//   tables), numSeqs, tables: Int32Array, q: Float32Array [T, qDim] (the rotated q, written),
//   out: Float32Array [T, qDim], helpers: 0 | 1). Rows of the step not in any sequence are left alone.
napi_value tesseraAttendLayer(napi_env env, napi_callback_info info) {
  size_t argc = 17;
  napi_value argv[17];
  const char* usage =
      "attendLayer(pool, numLayers, pageSize, numKvHeads, headDim, layer, qkv, numTokens, numHeads, scale, "
      "cosSin, seqs, numSeqs, tables, q, out, helpers): bad arguments";
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 17) {
    napi_throw_type_error(env, NULL, usage);
    return NULL;
  }
  int numLayers, pageSize, numKvHeads, headDim, layer, T, numHeads, numSeqs, helpers;
  double scale;
  void *pool, *qkv, *cosSin, *seqsV, *tablesV, *qOut, *out;
  size_t poolLen, qkvLen, csLen, seqsLen, tablesLen, qLen, outLen;
  if (!napiTyped(env, argv[0], napi_float32_array, &pool, &poolLen) || !napiInt32(env, argv[1], &numLayers) ||
      !napiInt32(env, argv[2], &pageSize) || !napiInt32(env, argv[3], &numKvHeads) ||
      !napiInt32(env, argv[4], &headDim) || !napiInt32(env, argv[5], &layer) ||
      !napiTyped(env, argv[6], napi_float32_array, &qkv, &qkvLen) || !napiInt32(env, argv[7], &T) ||
      !napiInt32(env, argv[8], &numHeads) || napi_get_value_double(env, argv[9], &scale) != napi_ok ||
      !napiTyped(env, argv[10], napi_float32_array, &cosSin, &csLen) ||
      !napiTyped(env, argv[11], napi_int32_array, &seqsV, &seqsLen) || !napiInt32(env, argv[12], &numSeqs) ||
      !napiTyped(env, argv[13], napi_int32_array, &tablesV, &tablesLen) ||
      !napiTyped(env, argv[14], napi_float32_array, &qOut, &qLen) ||
      !napiTyped(env, argv[15], napi_float32_array, &out, &outLen) || !napiInt32(env, argv[16], &helpers)) {
    napi_throw_type_error(env, NULL, usage);
    return NULL;
  }
  if (numLayers <= 0 || pageSize <= 0 || numKvHeads <= 0 || headDim <= 0 || (headDim & 1) != 0 || layer < 0 ||
      layer >= numLayers || T < 0 || numHeads < numKvHeads || numSeqs < 0 || numSeqs > MAX_SEQS ||
      (long)T * numHeads * headDim > 0x7FFFFFFF) {
    napi_throw_range_error(env, NULL, "attendLayer: bad shape");
    return NULL;
  }
  const size_t qDim = (size_t)numHeads * headDim, kvDim = (size_t)numKvHeads * headDim, width = qDim + 2 * kvDim;
  const size_t pageElems = (size_t)numLayers * 2 * pageSize * kvDim, poolPages = poolLen / pageElems;
  if (qkvLen < (size_t)T * width || csLen < (size_t)T * headDim || qLen < (size_t)T * qDim ||
      outLen < (size_t)T * qDim || seqsLen < (size_t)numSeqs * 4) {
    napi_throw_range_error(env, NULL, "attendLayer: qkv, cosSin, q, out or seqs is too short");
    return NULL;
  }
  const int32_t* seqs = (const int32_t*)seqsV;
  const int32_t* tables = (const int32_t*)tablesV;
  // Every sequence: rows inside the step, its page table inside `tables` and covering its
  // positions, every page of it inside the pool.
  for (int s = 0; s < numSeqs; s++) {
    const long row = seqs[4 * s], n = seqs[4 * s + 1], start = seqs[4 * s + 2], off = seqs[4 * s + 3];
    if (row < 0 || n <= 0 || row + n > T || start < 0 || start + n > 0x7FFFFFFF || off < 0) {
      napi_throw_range_error(env, NULL, "attendLayer: a sequence's rows are outside the step");
      return NULL;
    }
    const size_t pages = (size_t)(start + n + pageSize - 1) / pageSize;
    if ((size_t)off + pages > tablesLen) {
      napi_throw_range_error(env, NULL, "attendLayer: a page table is too short for its positions");
      return NULL;
    }
    for (size_t p = 0; p < pages; p++) {
      const int32_t page = tables[off + p];
      if (page < 0 || (size_t)page >= poolPages) {
        napi_throw_range_error(env, NULL, "attendLayer: a page table entry is outside the pool");
        return NULL;
      }
    }
  }
  if (numSeqs == 0) return NULL;
  if (tesseraVariant() < 0) {
    napi_throw_error(env, NULL, "attendLayer: this CPU has neither AVX-512 nor AVX2 + FMA + F16C");
    return NULL;
  }
  Attn* a = malloc(sizeof(Attn) * (size_t)numSeqs);
  int* itemStart = malloc(sizeof(int) * ((size_t)numSeqs + 1));
  if (a == NULL || itemStart == NULL) {
    free(a);
    free(itemStart);
    napi_throw_error(env, NULL, "attendLayer: out of memory");
    return NULL;
  }
  float* kvPool = (float*)pool;
  const float* x = (const float*)qkv;
  const float* cs = (const float*)cosSin;
  float* q = (float*)qOut;
  size_t scratch = 0;
  double work = 0;
  long items = 0;
  for (int s = 0; s < numSeqs; s++) {
    const int row = seqs[4 * s], n = seqs[4 * s + 1], start = seqs[4 * s + 2], off = seqs[4 * s + 3];
    // RoPE and this step's K / V into the pages (what the per-sequence calls did before attention).
    for (int i = 0; i < n; i++) {
      const size_t t = (size_t)row + i;
      const int pos = start + i;
      const float* xt = x + t * width;
      const float* ct = cs + t * headDim;
      for (int h = 0; h < numHeads; h++) rotate(xt + (size_t)h * headDim, ct, headDim, q + t * qDim + (size_t)h * headDim);
      const size_t page = (size_t)tables[off + pos / pageSize], slot = (size_t)(pos % pageSize);
      float* kRow = kvPool + (((page * numLayers + layer) * 2 + 0) * pageSize + slot) * kvDim;
      float* vRow = kvPool + (((page * numLayers + layer) * 2 + 1) * pageSize + slot) * kvDim;
      for (int h = 0; h < numKvHeads; h++) rotate(xt + qDim + (size_t)h * headDim, ct, headDim, kRow + (size_t)h * headDim);
      memcpy(vRow, xt + qDim + kvDim, kvDim * sizeof(float));
    }
    Attn* e = &a[s];
    memset(e, 0, sizeof(Attn));
    e->pool = (const uint8_t*)pool;
    e->headBytes = (size_t)headDim * 4;
    e->rowBytes = kvDim * 4;
    e->numLayers = numLayers;
    e->pageSize = pageSize;
    e->numKvHeads = numKvHeads;
    e->headDim = headDim;
    e->layer = layer;
    e->numHeads = numHeads;
    e->numTokens = n;
    e->startPos = start;
    e->window = 0;
    e->pageTable = tables + off;
    e->q = q + (size_t)row * qDim;
    e->out = (float*)out + (size_t)row * qDim;
    e->scale = (float)scale;
    e->sinks = NULL;
    e->avx2 = tesseraVariant() == 1;
    itemStart[s] = (int)items;
    items += (long)n * numKvHeads;
    const size_t need = runScratchFloats(e);
    if (need > scratch) scratch = need;
    work += (double)n * (start + n) * qDim;
  }
  itemStart[numSeqs] = (int)items;
  LayerJob job = {.seqs = a, .itemStart = itemStart, .numSeqs = numSeqs, .scratch = scratch};
  const int share = helpers == 1 && work >= SHARE_MIN_WORK;
  const int per = attentionChunk(items, numKvHeads);
  const int ok = attentionScratch(scratch) != NULL && tesseraShare(layerItems, &job, (int)items, per, share);
  free(a);
  free(itemStart);
  if (!ok) napi_throw_error(env, NULL, "attendLayer: out of memory for the scores (the output is incomplete)");
  return NULL;
}
