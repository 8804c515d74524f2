// What experts.c and experts-kquant.c share: one activation row as its dot products read it, and
// the K-quant side (GGML's q4_K and q6_K super-blocks read in place, activations as Q8_K).
#ifndef TESSERA_EXPERTS_H
#define TESSERA_EXPERTS_H
#include <immintrin.h>
#include <stdint.h>

// Tokens (slots) dotted with one weight row per pass: each block's codes and scale are decoded
// once for all of them (a token's own arithmetic is unchanged: the same bits alone or in a tile).
#define TILE 4

// One quantized activation row: q in element order, d per group (32 for Q8_0, 256 for Q8_K), and
// `aux`: Q8_0's -8 x each 4-group's sum (the VNNI q4_0 offset), Q8_K's sum of each 16 values.
typedef struct {
  const int8_t* q;
  const float* d;
  const int32_t* aux;
} XRow;

// max |src[i]| over i < n (n a multiple of 8): each quantizer's block scale (a max: exact in any order).
static inline float expertsAbsMax(const float* src, int n) {
  const __m256 absMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 amaxv = _mm256_setzero_ps();
  for (int v = 0; v < n; v += 8) amaxv = _mm256_max_ps(amaxv, _mm256_and_ps(_mm256_loadu_ps(src + v), absMask));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amaxv), _mm256_extractf128_ps(amaxv, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  return _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
}

// x[0, n) (n a multiple of 256) as llama.cpp's quantize_row_q8_K_ref: per 256 values
// iscale = 127/amax, q = round-to-even(iscale x), d = 1/iscale (ggml's -127/max negates q and d
// together: the same products), and the sums of each 16 q.
void expertsQuantizeQ8K(const float* x, int n, int8_t* q, float* d, int32_t* bsum);

// out[t] = one GGML q4_K or q6_K row (nsb super-blocks) . x[t], t < n <= TILE.
void expertsDotTileK(int kind, const uint8_t* w, const XRow* x, int n, int nsb, float* out);
#endif
