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

/**
 * Partial RoPE (GLM-4.5: the first ropeDims of a head rotate in NeoX pairs i, i + ropeDims/2, GLM-4:
 * in adjacent pairs 2i, 2i + 1 when `interleaved`; the rest pass through) in the rotate-half kernels' terms: a per-head order of rows, new row j <-
 * old row order[j], that puts rotating pair i at (i, i + headDim/2) for i < ropeDims/2 and pairs
 * the passing dims after them, which rope.ts gives inverse frequency 0 (cos 1, sin 0: unchanged).
 * Applied alike to q and k (and their biases and norm weights) it leaves every q·k, hence the
 * attention, as it was.
 */
export function partialRopeOrder(headDim: number, ropeDims: number, interleaved = false): Int32Array {
  const half = headDim / 2;
  const rotHalf = ropeDims / 2;
  const passHalf = (headDim - ropeDims) / 2;
  const order = new Int32Array(headDim);
  for (let j = 0; j < half; j++) {
    // GLM-4's interleaved pairs are (2j, 2j + 1); NeoX's (j, j + ropeDims/2).
    order[j] = j < rotHalf ? (interleaved ? 2 * j : j) : ropeDims + (j - rotHalf);
    order[half + j] = j < rotHalf ? (interleaved ? 2 * j + 1 : rotHalf + j) : ropeDims + passHalf + (j - rotHalf);
  }
  return order;
}

/** t's rows reordered within each of numHeads heads: new row h·hd + j <- old row h·hd + order[j]. */
export function permuteHeadRows(t: HostTensor, numHeads: number, order: Int32Array): HostTensor {
  const rows = t.shape[0]!;
  const headDim = order.length;
  assert(rows === numHeads * headDim, `${t.name}: ${rows} rows are not ${numHeads} heads of ${headDim}`);
  const rowBytes = t.data.byteLength / rows;
  const out = new Uint8Array(t.data.byteLength);
  for (let h = 0; h < numHeads; h++) {
    for (let j = 0; j < headDim; j++) {
      const from = h * headDim + order[j]!;
      out.set(t.data.subarray(from * rowBytes, (from + 1) * rowBytes), (h * headDim + j) * rowBytes);
    }
  }
  return { name: t.name, dtype: t.dtype, shape: t.shape, data: out };
}
