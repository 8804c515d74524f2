// The GGUF file format (v3), shared by gguf-reader.ts and gguf-writer.ts:
//
//   "GGUF" | u32 version | u64 tensor_count | u64 kv_count
//   kv_count x   { string key | u32 value_type | value }
//   tensor_count x { string name | u32 n_dims | u64 ne[n_dims] | u32 ggml_type | u64 offset }
//   padding to `general.alignment` (default 32)
//   data section: each tensor at data_start + offset (offsets aligned too)
//
//   string = u64 length | utf-8 bytes;  array = u32 item_type | u64 count | items
//   ne[0] is the fastest-moving dimension: a matrix [rows=out, cols=in] has ne = [in, out].
// Constants and types only; no I/O.
import type { WeightDType } from '../kernels/index.js';

export const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
export const GGUF_DEFAULT_ALIGNMENT = 32;
export const GGML_MAX_DIMS = 4;

export const GGUF_SCALAR_TYPES = [
  'u8',
  'i8',
  'u16',
  'i16',
  'u32',
  'i32',
  'f32',
  'bool',
  'string',
  'u64',
  'i64',
  'f64',
] as const;
export type GgufScalarType = (typeof GGUF_SCALAR_TYPES)[number];

/** On-disk value type codes (gguf_type). 9 is ARRAY. */
export const GGUF_TYPE_CODE: Readonly<Record<GgufScalarType | 'array', number>> = {
  u8: 0,
  i8: 1,
  u16: 2,
  i16: 3,
  u32: 4,
  i32: 5,
  f32: 6,
  bool: 7,
  string: 8,
  array: 9,
  u64: 10,
  i64: 11,
  f64: 12,
};

export type GgufScalar = number | bigint | boolean | string;

/** One metadata value. u64/i64 are bigints; every other number is a JS number. */
export type GgufValue =
  | { readonly type: GgufScalarType; readonly value: GgufScalar }
  | { readonly type: 'array'; readonly itemType: GgufScalarType; readonly items: readonly GgufScalar[] }
  | { readonly type: 'array'; readonly itemType: 'array'; readonly items: readonly GgufValue[] };

/** GGML tensor types Tessera knows by name; only those with a WeightDType can be loaded. */
export const GGML_TYPE_NAMES: Readonly<Record<number, string>> = {
  0: 'F32',
  1: 'F16',
  2: 'Q4_0',
  3: 'Q4_1',
  6: 'Q5_0',
  7: 'Q5_1',
  8: 'Q8_0',
  9: 'Q8_1',
  10: 'Q2_K',
  11: 'Q3_K',
  12: 'Q4_K',
  13: 'Q5_K',
  14: 'Q6_K',
  15: 'Q8_K',
  16: 'IQ2_XXS',
  17: 'IQ2_XS',
  18: 'IQ3_XXS',
  19: 'IQ1_S',
  20: 'IQ4_NL',
  21: 'IQ3_S',
  22: 'IQ2_S',
  23: 'IQ4_XS',
  24: 'I8',
  25: 'I16',
  26: 'I32',
  27: 'I64',
  28: 'F64',
  29: 'IQ1_M',
  30: 'BF16',
  34: 'TQ1_0',
  35: 'TQ2_0',
  39: 'MXFP4',
};

/** [weights per block, bytes per block] of GGML types, to check a tensor fits its file. */
export const GGML_BLOCK: Readonly<Record<number, readonly [number, number]>> = {
  0: [1, 4],
  1: [1, 2],
  2: [32, 18],
  3: [32, 20],
  6: [32, 22],
  7: [32, 24],
  8: [32, 34],
  9: [32, 36],
  10: [256, 84],
  11: [256, 110],
  12: [256, 144],
  13: [256, 176],
  14: [256, 210],
  15: [256, 292],
  24: [1, 1],
  25: [1, 2],
  26: [1, 4],
  27: [1, 8],
  28: [1, 8],
  30: [1, 2],
  39: [32, 17], // MXFP4: repacked at load (mxfp4.ts)
};

export const GGML_TYPE_OF_DTYPE: Readonly<Record<WeightDType, number>> = {
  f32: 0,
  f16: 1,
  q4_0: 2,
  q8_0: 8,
  bf16: 30,
  q4_k: 12,
  q5_k: 13,
  q6_k: 14,
};

export function dtypeOfGgmlType(code: number): WeightDType | null {
  for (const [dtype, c] of Object.entries(GGML_TYPE_OF_DTYPE)) if (c === code) return dtype as WeightDType;
  return null;
}

export function ggmlTypeName(code: number): string {
  return GGML_TYPE_NAMES[code] ?? `unknown type ${code}`;
}

/** llama.cpp's general.file_type (LLAMA_FTYPE_*) for a file whose matrices are all `dtype` (q4_k: Q4_K_S). */
export const FILE_TYPE_OF_DTYPE: Readonly<Record<WeightDType, number>> = {
  f32: 0,
  f16: 1,
  q4_0: 2,
  q8_0: 7,
  bf16: 32,
  q4_k: 14,
  q5_k: 16,
  q6_k: 18,
};

/** llama.cpp token types (tokenizer.ggml.token_type). */
export const TOKEN_TYPE = { normal: 1, unknown: 2, control: 3, userDefined: 4, unused: 5, byte: 6 } as const;

export function alignUp(n: number, alignment: number): number {
  return Math.ceil(n / alignment) * alignment;
}
