// What dense.c and its kernel variants (dense-avx512.c, dense-avx2.c) share: the weight kinds,
// the repacked layout's sizes (dense.c's header describes the layout), one call's Job, and each
// variant's entry points. Plain C: nothing here may use an instruction beyond x86-64's baseline
// (dense.c is compiled without -m flags and runs before the CPU is checked).
#ifndef TESSERA_DENSE_H
#define TESSERA_DENSE_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum Kind { K_F32 = 0, K_F16 = 1, K_BF16 = 2, K_Q4_0 = 3, K_Q8_0 = 4, K_Q4_K = 5, K_Q5_K = 6, K_Q6_K = 7 };

#define QK 256
// Repacked bytes per super-block.
static inline int superBytes(int kind) {
  switch (kind) {
    case K_Q4_0: return 16 + 128;
    case K_Q8_0: return 16 + 256;
    case K_Q4_K: return 20 + 128;
    case K_Q5_K: return 20 + 128 + 32;
    case K_Q6_K: return 18 + 128 + 64;
    default: return 0;
  }
}
static inline int isBlockKind(int kind) { return kind >= K_Q4_0 && kind <= K_Q6_K; }
// Float weights: panels of PR rows, column-major inside (see floatPanel).
#define PR 32
static inline int floatRowsPad(int rows) { return (rows + PR - 1) / PR * PR; }
static inline size_t floatElem(int kind) { return kind == K_F32 ? 4 : 2; }
// Bytes of a repacked weight.
static inline size_t weightBytes(int kind, int rows, int cols) {
  if (!isBlockKind(kind)) return (size_t)floatRowsPad(rows) * cols * floatElem(kind);
  return (size_t)rows * ((cols + QK - 1) / QK) * superBytes(kind);
}

static inline uint16_t rd16(const uint8_t* p) { return (uint16_t)(p[0] | (p[1] << 8)); }

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

// x rounded to bf16 as ggml_compute_fp32_to_bf16 (a NaN kept quiet, else to nearest even).
static inline float bf16Round(float v) {
  uint32_t b;
  memcpy(&b, &v, 4);
  b = (b & 0x7fffffff) > 0x7f800000 ? (b | (64 << 16)) & 0xffff0000u : (b + (0x7fff + ((b >> 16) & 1))) & 0xffff0000u;
  memcpy(&v, &b, 4);
  return v;
}

// One instruction-set variant of the kernels, compiled in its own translation unit with its own
// -m flags (scripts/build-native.mjs); dense.c calls one only on a CPU with its features.
typedef struct {
  const char* name;
  // One x row quantized as llama.cpp quantizes it for `kind` (dense.c's header): q[kpad] int8 in
  // the codes' order, dx16[kpad / 16] (the block's d, per 16 values), c16 (d * the 16 q's sum).
  void (*quantizeRow)(int kind, const float* x, int cols, int kpad, int8_t* q, float* dx16, float* c16);
  // x[0, n) rounded to f16 or bf16 (kind) and widened back, as llama.cpp's F16 / BF16 vec_dot_type.
  void (*roundRow)(int kind, const float* x, size_t n, float* out);
  // y for every x row and weight rows [r0, r1) (r0 a multiple of PR for float kinds).
  void (*computeRows)(const Job* j, int r0, int r1);
} DenseVariant;

extern const DenseVariant denseAvx512;
extern const DenseVariant denseAvx2;

// The variant chosen (0: AVX-512 VNNI, 1: AVX2, -1: none; dense.c): attention.c follows it.
int tesseraVariant(void);

// One chunk of shared work: items [i0, i1) of ctx's job; 0 when it could not be done (no scratch).
typedef int (*ShareFn)(void* ctx, int i0, int i1);
// Runs fn over items [0, count), `per` a chunk, on the calling thread and (useHelpers, when no
// other caller has them) dense.c's helper threads; returns when every chunk is done, 0 when one
// failed. Chunks never split an item, so an item's result does not depend on who computed it.
int tesseraShare(ShareFn fn, void* ctx, int count, int per, int useHelpers);
// Threads a shared job can run on: the caller and the helpers started (setThreads).
int tesseraThreads(void);
#endif
