// Repacks GGML K-quants (kquants.ts) into onnxruntime's MatMulNBits layout, still 4 or 8 bits
// per weight. MatMulNBits computes w = scale * (q - z) with one scale per block and its default
// zero point z = 2^(bits-1); K-quants compute w = s * q - m per sub-block. So:
//
//   Q4_K  4-bit, blocks of 32: q as is (0..15), scale s;  MatMulNBits gives s * (q - 8)
//   Q5_K  8-bit, blocks of 32: q + 112 (112..143), scale s;  MatMulNBits gives s * (q - 16)
//         both leave a per-block term  (z' * s - m) * Σ_block x  for a second, 32x smaller product:
//         y = MatMulNBits(x) + blockSums(x) · Cᵀ,   C [rows, cols / 32],  C[b] = z' * s_b - m_b
//   Q6_K  8-bit, blocks of 16: (q - 32) + 128, scale s;  exact, no correction
//
// Every weight keeps its value: s, m are ggml's f32 products, the shifted quants are integers.
// (Q5_K as 8-bit costs 8.5 bits a weight in memory where the file holds 5.5.)
import { QK_K, decodeKBlock, newKBlock, type KQuant } from '../kquants.js';

export interface KNBitsWeight {
  readonly bits: 4 | 8;
  readonly blockSize: 16 | 32;
  /** [rows, cols / blockSize, blockSize * bits / 8] */
  readonly blocks: Uint8Array;
  /** [rows * cols / blockSize] */
  readonly scales: Float32Array;
  /** [rows, cols / 32], or null when the quants need no correction (Q6_K). */
  readonly correction: Float32Array | null;
}

export function repackK(dtype: KQuant, data: Uint8Array, rows: number, cols: number): KNBitsWeight {
  const numSuper = (rows * cols) / QK_K;
  const blk = newKBlock();
  if (dtype === 'q6_k') {
    const blocks = new Uint8Array(rows * cols);
    const scales = new Float32Array((rows * cols) / 16);
    for (let b = 0; b < numSuper; b++) {
      decodeKBlock(dtype, data, b, blk);
      scales.set(blk.scales, b * 16);
      for (let i = 0; i < QK_K; i++) blocks[b * QK_K + i] = blk.q[i]! + 128;
    }
    return { bits: 8, blockSize: 16, blocks, scales, correction: null };
  }
  const four = dtype === 'q4_k';
  const blocks = new Uint8Array(four ? (rows * cols) / 2 : rows * cols);
  const scales = new Float32Array((rows * cols) / 32);
  const correction = new Float32Array((rows * cols) / 32);
  const shift = four ? 8 : 16;
  for (let b = 0; b < numSuper; b++) {
    decodeKBlock(dtype, data, b, blk);
    for (let j = 0; j < 8; j++) {
      scales[b * 8 + j] = blk.scales[j]!;
      correction[b * 8 + j] = Math.fround(shift * blk.scales[j]! - blk.mins[j]!);
    }
    if (four) for (let i = 0; i < QK_K / 2; i++) blocks[b * 128 + i] = blk.q[2 * i]! | (blk.q[2 * i + 1]! << 4);
    else for (let i = 0; i < QK_K; i++) blocks[b * QK_K + i] = blk.q[i]! + 112;
  }
  return { bits: four ? 4 : 8, blockSize: 32, blocks, scales, correction };
}
