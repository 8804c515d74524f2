// The WebAssembly kernels' exports (compiled by scripts/build-wasm.mjs to build/kernels.wasm).
// Functions take byte offsets into the imported shared memory; the TS side (../runtime.ts)
// owns every allocation. No static data, no managed objects: instances may share one memory.
export { matmul } from './dense';
export { rmsNorm, rope, siluMul, geluTanhMul, addInPlace, sumF32 } from './ops';
export { attention, attentionF16, attentionQ8, f32ToF16Row } from './attention';
export { quantizeRowsQ8 } from './kv-q8';

export function heapBase(): usize {
  return __heap_base;
}
