// Tessera's dense dot products for ARM NEON with the dotprod extension (Armv8.2-A+, e.g.
// Graviton 2+, Apple M1+, Cortex-A76+): q4_0 and q8_0 weight rows in GGML's own block layout
// (18 / 34 bytes per 32 weights) against activations quantized as llama.cpp's CPU backend
// quantizes them for those kinds (Q8_0: per 32, d = f16(amax / 127), q = round(x * 127 / amax),
// to nearest even). Per block: the int32 sum of code x q from sdot (vdotq_s32, exact), times
// d_w * d_x in f32, summed in block order. Not yet part of the addon (the x86-64 variants are):
// it is compiled and checked against scalar reference values under qemu-aarch64 by
// dot-neon-test.c (run by test/kernels/neon.test.ts). Never allocates.
#include <arm_neon.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "dot-neon.h"

static inline float f16ToF32(const uint8_t* p) {
  __fp16 h;
  memcpy(&h, p, 2);
  return (float)h;
}

void neonQuantizeQ8_0(const float* x, int cols, int8_t* q, float* d) {
  for (int b = 0; b < cols / 32; b++) {
    const float* xb = x + 32 * b;
    float32x4_t amax = vdupq_n_f32(0);
    for (int i = 0; i < 32; i += 4) amax = vmaxq_f32(amax, vabsq_f32(vld1q_f32(xb + i)));
    const float m = vmaxvq_f32(amax);
    const __fp16 dh = (__fp16)(m / 127.0f);
    const float id = m != 0 ? 127.0f / m : 0.0f;
    d[b] = (float)dh;
    for (int i = 0; i < 32; i += 8) {
      int32x4_t a = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(xb + i), id));  // to nearest even
      int32x4_t c = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(xb + i + 4), id));
      int16x8_t s16 = vcombine_s16(vqmovn_s32(a), vqmovn_s32(c));
      vst1_s8(q + 32 * b + i, vqmovn_s16(s16));
    }
  }
}

float neonDotQ4_0(const uint8_t* w, const int8_t* q, const float* d, int cols) {
  float sum = 0;
  const uint8x16_t nib = vdupq_n_u8(15);
  const int8x16_t eight = vdupq_n_s8(8);
  for (int b = 0; b < cols / 32; b++) {
    const uint8_t* blk = w + 18 * b;
    uint8x16_t codes = vld1q_u8(blk + 2);
    // GGML's q4_0: byte j holds element j (low nibble) and j + 16 (high), codes - 8 signed.
    int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(codes, nib)), eight);
    int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(codes, 4)), eight);
    int32x4_t acc = vdotq_s32(vdupq_n_s32(0), lo, vld1q_s8(q + 32 * b));
    acc = vdotq_s32(acc, hi, vld1q_s8(q + 32 * b + 16));
    sum += (float)vaddvq_s32(acc) * (f16ToF32(blk) * d[b]);
  }
  return sum;
}

float neonDotQ8_0(const uint8_t* w, const int8_t* q, const float* d, int cols) {
  float sum = 0;
  for (int b = 0; b < cols / 32; b++) {
    const uint8_t* blk = w + 34 * b;
    int32x4_t acc = vdotq_s32(vdupq_n_s32(0), vld1q_s8((const int8_t*)blk + 2), vld1q_s8(q + 32 * b));
    acc = vdotq_s32(acc, vld1q_s8((const int8_t*)blk + 18), vld1q_s8(q + 32 * b + 16));
    sum += (float)vaddvq_s32(acc) * (f16ToF32(blk) * d[b]);
  }
  return sum;
}
