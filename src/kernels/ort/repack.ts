// Repacks GGML block weights into onnxruntime's com.microsoft MatMulNBits layout, keeping them
// at 4 or 8 bits. MatMulNBits computes y = x · dequant(B)ᵀ with B [N, K/32, blob] uint8 and
// one f32 scale per block; its default zero point is 2^(bits-1) (8 for 4 bits, 128 for 8).
//
//   GGML q4_0 block:  f16 d | qs[16]: element j = qs[j] & 15, element j + 16 = qs[j] >> 4
//   MatMulNBits 4-bit blob: 16 bytes, element 2i in the low nibble of byte i, 2i+1 in the high
//   GGML q8_0 block:  f16 d | int8 q[32]          MatMulNBits 8-bit blob: uint8 q + 128
//
// Both formats subtract the same zero point (8 or 128) and multiply by the same d (f16 widened
// to f32 exactly), so the dequantized weights are identical. Never changes a weight's value.
import { QK, Q4_0_BLOCK_BYTES, Q8_0_BLOCK_BYTES, f16ToF32 } from '../formats.js';

export interface NBitsWeight {
  readonly bits: 4 | 8;
  /** [rows, cols / 32, 32 * bits / 8] */
  readonly blocks: Uint8Array;
  /** [rows * cols / 32] */
  readonly scales: Float32Array;
}

export function repackQ4_0(data: Uint8Array, rows: number, cols: number): NBitsWeight {
  const numBlocks = (rows * cols) / QK;
  const blocks = new Uint8Array(numBlocks * 16);
  const scales = new Float32Array(numBlocks);
  const nibble = new Uint8Array(QK);
  for (let b = 0; b < numBlocks; b++) {
    const at = b * Q4_0_BLOCK_BYTES;
    scales[b] = f16ToF32(data[at]! | (data[at + 1]! << 8));
    for (let j = 0; j < 16; j++) {
      const byte = data[at + 2 + j]!;
      nibble[j] = byte & 15;
      nibble[j + 16] = byte >> 4;
    }
    for (let i = 0; i < 16; i++) blocks[b * 16 + i] = nibble[2 * i]! | (nibble[2 * i + 1]! << 4);
  }
  return { bits: 4, blocks, scales };
}

export function repackQ8_0(data: Uint8Array, rows: number, cols: number): NBitsWeight {
  const numBlocks = (rows * cols) / QK;
  const blocks = new Uint8Array(numBlocks * QK);
  const scales = new Float32Array(numBlocks);
  for (let b = 0; b < numBlocks; b++) {
    const at = b * Q8_0_BLOCK_BYTES;
    scales[b] = f16ToF32(data[at]! | (data[at + 1]! << 8));
    for (let j = 0; j < QK; j++) blocks[b * QK + j] = data[at + 2 + j]! ^ 0x80; // int8 q -> uint8 q + 128
  }
  return { bits: 8, blocks, scales };
}
