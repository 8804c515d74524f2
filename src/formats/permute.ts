// The row permutation llama.cpp's converter applies to Llama/Mistral Q and K weights, so that
// GGML's rope (adjacent pairs 2j, 2j+1) computes what Hugging Face's rotate-half rope (pairs j,
// j + headDim/2) computes. Tessera uses one convention, rotate-half: GGUF loaders undo the
// permutation and gen-model applies it. Within each head of headDim rows:
//
//   GGUF row 2j + s  <->  HF row s * headDim/2 + j        (j < headDim/2, s in {0, 1})
//
// Whole rows move, so it works on any dtype, quantized blocks included (blocks never cross
// rows), and on 1-D biases (a "row" of one element). It never changes a byte inside a row.
import { assert } from '../core/index.js';
import type { HostTensor } from '../kernels/index.js';

export type RopeRowOrder = 'hf-to-gguf' | 'gguf-to-hf';

export function permuteRopeRows(t: HostTensor, numHeads: number, direction: RopeRowOrder): HostTensor {
  const rows = t.shape[0]!;
  assert(rows % numHeads === 0, `${t.name}: ${rows} rows do not split into ${numHeads} heads`);
  const headDim = rows / numHeads;
  assert(headDim % 2 === 0, `${t.name}: odd head dim ${headDim}`);
  assert(t.data.byteLength % rows === 0, `${t.name}: ${t.data.byteLength} bytes do not split into ${rows} rows`);
  const rowBytes = t.data.byteLength / rows;
  const half = headDim / 2;
  const out = new Uint8Array(t.data.byteLength);
  for (let h = 0; h < numHeads; h++) {
    for (let j = 0; j < half; j++) {
      for (let s = 0; s < 2; s++) {
        const gguf = h * headDim + 2 * j + s;
        const hf = h * headDim + s * half + j;
        const [from, to] = direction === 'gguf-to-hf' ? [gguf, hf] : [hf, gguf];
        out.set(t.data.subarray(from * rowBytes, (from + 1) * rowBytes), to * rowBytes);
      }
    }
  }
  return { name: t.name, dtype: t.dtype, shape: t.shape, data: out };
}
