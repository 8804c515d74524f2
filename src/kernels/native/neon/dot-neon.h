// dot-neon.c's entry points: Q8_0 activation quantization and one weight row's dot product
// (cols a multiple of 32; w in GGML's q4_0 / q8_0 block layout).
#ifndef TESSERA_DOT_NEON_H
#define TESSERA_DOT_NEON_H
#include <stdint.h>

// x[cols] -> q[cols] int8 and d[cols / 32] (each the f16-rounded scale, as f32).
void neonQuantizeQ8_0(const float* x, int cols, int8_t* q, float* d);
float neonDotQ4_0(const uint8_t* w, const int8_t* q, const float* d, int cols);
float neonDotQ8_0(const uint8_t* w, const int8_t* q, const float* d, int cols);
#endif
