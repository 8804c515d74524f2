// What attention.c and its kernel variants (attention-avx512.c, attention-avx2.c) share: one
// call's arguments and the walk over a request's pages. Plain C (attention.c is compiled for
// baseline x86-64). The variants compute the same sums with 16 or 8 lanes.
#ifndef TESSERA_ATTENTION_H
#define TESSERA_ATTENTION_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
  const uint8_t* pool;
  size_t rowBytes, headBytes;  // of one slot's row and of one KV head in it
  int f16, q8, avx2, numLayers, pageSize, numKvHeads, headDim, layer, numHeads, numTokens, startPos, window;
  const int32_t* pageTable;
  const float* q;
  float* out;
  float scale;
  const float* sinks;  // [numHeads] learned logits in each softmax's max and denominator (gpt-oss); NULL: none
} Attn;

// The max and denominator of head h's softmax with its sink (if any) taken in: m = max(max, sink),
// and the sink's e^(sink - m) to add to the sum of the scores' e^(s - m) (0 without one).
static inline float sinkMax(const Attn* a, int h, float max) {
  return a->sinks != NULL && a->sinks[h] > max ? a->sinks[h] : max;
}
float sinkTerm(const Attn* a, int h, float max);

// Slot 0's row (K: kv = 0, V: 1) of KV head kvh in the page holding positions [pi * pageSize, ..).
static inline const uint8_t* pageRow0(const Attn* a, int kv, int pi, int kvh) {
  size_t page = (size_t)a->pageTable[pi];
  return a->pool + (((page * a->numLayers + a->layer) * 2 + kv) * a->pageSize) * a->rowBytes + (size_t)kvh * a->headBytes;
}

// Every position j in [lo, n) with its row of KV head kvh, page by page: BODY sees j and row (the
// caller's rowBytes: from one slot's row to the next).
#define FOR_ROWS(a, kv, kvh, lo, n, BODY)                                                    \
  for (int pi_ = (lo) / (a)->pageSize; pi_ * (a)->pageSize < (n); pi_++) {                   \
    const int first_ = pi_ * (a)->pageSize;                                                  \
    const uint8_t* base_ = pageRow0(a, kv, pi_, kvh);                                        \
    const int j0_ = (lo) > first_ ? (lo) : first_;                                           \
    const int j1_ = first_ + (a)->pageSize < (n) ? first_ + (a)->pageSize : (n);             \
    for (int j = j0_; j < j1_; j++) {                                                        \
      const uint8_t* row = base_ + (size_t)(j - first_) * rowBytes;                          \
      BODY                                                                                   \
    }                                                                                        \
  }


// The query heads that read KV head kvh, [*h0, *h1): those with h * numKvHeads / numHeads == kvh.
static inline void groupHeads(const Attn* a, int kvh, int* h0, int* h1) {
  *h0 = (int)(((long)kvh * a->numHeads + a->numKvHeads - 1) / a->numKvHeads);
  *h1 = (int)(((long)(kvh + 1) * a->numHeads + a->numKvHeads - 1) / a->numKvHeads);
}

// out[t, h] for one token t and head h of a checked call, scores: scratch of startPos +
// numTokens + 16 floats.
void attendHeadAvx512(const Attn* a, int t, int h, float* scores);
// Most query heads per KV head that attendGroupAvx512 takes at once (more: one by one).
#define GROUP_MAX 16
// out[t, h] for token t and every head h of KV head kvh's group (attention-avx512.c), the same
// bits as attendHeadAvx512 for each; scratch: scratchFloats(a) floats.
void attendGroupAvx512(const Attn* a, int t, int kvh, float* scratch);
// Floats of per-thread scratch one (token, KV head) item needs: a group's scores and sums.
static inline size_t scratchFloats(const Attn* a) {
  size_t g = (size_t)(a->numHeads + a->numKvHeads - 1) / a->numKvHeads;
  if (g > GROUP_MAX) g = 1;
  return g * (256 + (size_t)a->startPos + a->numTokens + 32);
}
// Most KV heads attendGroupsAvx512 takes in one run.
#define GROUP_RUN_MAX 4
// KV heads [kvh0, kvh1) of token t in one run (attention-avx512.c), each with attendGroupAvx512's
// bits, their rows read page by page together; 0 (nothing written) where the call's shape is not
// one it takes: the caller then runs them one by one. scratch: runScratchFloats(a) floats.
int attendGroupsAvx512(const Attn* a, int t, int kvh0, int kvh1, float* scratch);
// Floats of per-thread scratch a run of up to GROUP_RUN_MAX items needs (at least scratchFloats).
static inline size_t runScratchFloats(const Attn* a) {
  const size_t g = (size_t)(a->numHeads + a->numKvHeads - 1) / a->numKvHeads;
  const size_t run = a->numKvHeads < GROUP_RUN_MAX ? (size_t)a->numKvHeads : GROUP_RUN_MAX;
  return run * (scratchFloats(a) + g * (size_t)a->headDim);
}
void attendHeadAvx2(const Attn* a, int t, int h, float* scores);

// attention.c: this thread's scores scratch of at least `need` floats (grown as needed; NULL when it
// cannot be had), and one work item, token t and KV head kvh (every query head reading it, whole), on
// the variant dense.c chose; attention-layer.c runs its items through the same two.
float* attentionScratch(size_t need);
void attendItem(const Attn* a, int t, int kvh, float* scratch);
// Items [i0, i1) of a call (item t * numKvHeads + kvh), in runs where the variant takes them
// (scratch: runScratchFloats(a) floats), and how many items a thread takes at a time.
void attendRange(const Attn* a, int i0, int i1, float* scratch);
int attentionChunk(long items, int numKvHeads);
#endif
