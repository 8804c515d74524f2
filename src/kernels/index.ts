// Layer 1: compute kernels behind two interfaces (see types.ts), with ref, wasm and native
// backends; which one runs what is decided in one place, choose.ts (planKernels, createKernels).
//   ref/    plain TypeScript, the oracle          createRefDense(), createRefOps()
//   wasm/   WebAssembly SIMD on a shared memory   loadWasmRuntime(), createWasmOps(), createWasmDense()
//   native/ our C kernels (Node-API addon)        NativeDense, NativeAttentionOps, nativeAvailability()
// Case suites every backend runs live in cases/ (test-only).
export type * from './types.js';
export * from './formats.js';
export { QK_K, K_BLOCK_BYTES, isKQuant, type KQuant } from './kquants.js';
export { kvIndex, pageElements } from './layout.js';
export {
  KERNEL_CHOICES,
  createKernels,
  detectKernelSupport,
  formatKernelPlan,
  planKernels,
  summarizeKernelPlan,
  type KernelBackend,
  type KernelChoice,
  type KernelPlan,
  type KernelPlanRow,
  type KernelSupport,
} from './choose.js';
export { createRefDense } from './ref/dense.js';
export { createRefOps } from './ref/ops.js';
export { WasmRuntime, MAX_WASM_MEMORY_BYTES, type WasmRuntimeOptions } from './wasm/runtime.js';
export { WasmOps, createWasmOps } from './wasm/ops.js';
export { WasmDense, createWasmDense, type WasmDenseOptions } from './wasm/dense.js';
export {
  NativeDense,
  nativeArgmax,
  nativeAvailability,
  nativeLoraRows,
  mapFileReadOnly,
  type MappedPiece,
  PIECE_STRIDE,
  releaseMappedPages,
  nativeVariant,
  nativeVariantsHere,
  selectNativeVariant,
  NATIVE_VARIANT_CHOICES,
  type NativeDenseOptions,
  type NativeVariant,
  type NativeVariantChoice,
} from './native/native.js';
export { NativeAttentionOps } from './native/native-ops.js';
export { expertKindInPlace } from './native/experts-native.js';

import { WasmRuntime, type WasmRuntimeOptions } from './wasm/runtime.js';

/** One WebAssembly runtime (memory + kernels) to share between WasmOps and WasmDense. */
export function loadWasmRuntime(options: WasmRuntimeOptions = {}): Promise<WasmRuntime> {
  return WasmRuntime.load(options);
}
