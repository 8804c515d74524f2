// Checks dot-neon.c under qemu-aarch64 (`npm run test:neon`): its Q8_0 activation quantization
// and its q4_0 / q8_0 dot products against plain scalar C written from GGML's block layout and
// llama.cpp's quantize_row_q8_0_ref (bit-identical expected: the same integer sums in the same
// order), and against the f64 dot of the dequantized values (within the int8 rounding). Exits 1
// with the first mismatch; a negative control (NEON_TEST_BREAK=1) flips one weight code and must
// fail. Test code only.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dot-neon.h"

static uint32_t rng = 12345;
static float frand(void) {
  rng = rng * 1664525u + 1013904223u;
  return ((rng >> 8) / 16777216.0f) * 2 - 1;
}

static float h2f(const uint8_t* p) {
  __fp16 h;
  memcpy(&h, p, 2);
  return (float)h;
}
static void f2h(float v, uint8_t* p) {
  __fp16 h = (__fp16)v;
  memcpy(p, &h, 2);
}

// Scalar reference of llama.cpp's Q8_0 activation quantization.
static void refQuantize(const float* x, int cols, int8_t* q, float* d) {
  for (int b = 0; b < cols / 32; b++) {
    float amax = 0;
    for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[32 * b + i]));
    d[b] = (float)(__fp16)(amax / 127.0f);
    float id = amax != 0 ? 127.0f / amax : 0;
    for (int i = 0; i < 32; i++) q[32 * b + i] = (int8_t)nearbyintf(x[32 * b + i] * id);
  }
}

// The weight's code (signed) of element i in GGML's layout.
static int code(int kind, const uint8_t* w, int i) {
  const uint8_t* blk = w + (kind == 4 ? 18 : 34) * (i / 32);
  int j = i % 32;
  if (kind == 4) return (j < 16 ? blk[2 + j] & 15 : blk[2 + j - 16] >> 4) - 8;
  return (int8_t)blk[2 + j];
}

static float refDot(int kind, const uint8_t* w, const int8_t* q, const float* d, int cols) {
  float sum = 0;
  for (int b = 0; b < cols / 32; b++) {
    int32_t s = 0;
    for (int i = 0; i < 32; i++) s += code(kind, w, 32 * b + i) * q[32 * b + i];
    sum += (float)s * (h2f(w + (kind == 4 ? 18 : 34) * b) * d[b]);
  }
  return sum;
}

int main(void) {
  const int breakIt = getenv("NEON_TEST_BREAK") != NULL;
  int failures = 0, checks = 0;
  for (int kind = 4; kind <= 5; kind++) {  // 4: q4_0, 5: q8_0
    for (int cols = 32; cols <= 4096; cols *= 2) {
      const int bb = kind == 4 ? 18 : 34;
      uint8_t* w = malloc((size_t)bb * cols / 32);
      float* x = malloc(sizeof(float) * cols);
      int8_t *q = malloc(cols), *rq = malloc(cols);
      float *d = malloc(sizeof(float) * cols / 32), *rd = malloc(sizeof(float) * cols / 32);
      for (int b = 0; b < cols / 32; b++) {
        f2h(0.01f + 0.02f * fabsf(frand()), w + bb * b);
        for (int j = 0; j < bb - 2; j++) w[bb * b + 2 + j] = (uint8_t)(rng = rng * 1664525u + 1013904223u) >> 3;
        if (kind == 5)
          for (int j = 0; j < 32; j++)
            if (w[bb * b + 2 + j] == 0x80) w[bb * b + 2 + j] = 0x81;  // GGML's q8_0 codes are in [-127, 127]
      }
      for (int i = 0; i < cols; i++) x[i] = frand() * (i % 97 == 0 ? 8.0f : 1.0f);
      neonQuantizeQ8_0(x, cols, q, d);
      refQuantize(x, cols, rq, rd);
      checks++;
      if (memcmp(q, rq, cols) != 0 || memcmp(d, rd, sizeof(float) * cols / 32) != 0) {
        printf("FAIL quantize cols=%d\n", cols);
        failures++;
      }
      if (breakIt) w[2] ^= 0x11;
      float got = kind == 4 ? neonDotQ4_0(w, q, d, cols) : neonDotQ8_0(w, q, d, cols);
      if (breakIt) w[2] ^= 0x11;
      float want = refDot(kind, w, rq, rd, cols);
      double exact = 0, scale = 0;
      for (int i = 0; i < cols; i++) {
        double wi = (double)code(kind, w, i) * h2f(w + bb * (i / 32));
        exact += wi * x[i];
        scale += fabs(wi * x[i]);
      }
      checks += 2;
      if (got != want) {
        printf("FAIL %s cols=%d: neon %.9g, scalar %.9g\n", kind == 4 ? "q4_0" : "q8_0", cols, got, want);
        failures++;
      }
      if (fabs(got - exact) > 0.02 * scale / sqrt(cols / 32.0) + 1e-6) {
        printf("FAIL %s cols=%d: neon %.6g, f64 %.6g (scale %.3g)\n", kind == 4 ? "q4_0" : "q8_0", cols, got, exact, scale);
        failures++;
      }
      free(w), free(x), free(q), free(rq), free(d), free(rd);
    }
  }
  printf("%s: %d checks, %d failures\n", failures ? "FAIL" : "ok", checks, failures);
  return failures ? 1 : 0;
}
