// Layer 1: compute kernels behind two interfaces (see types.ts), with ref, wasm and ort backends.
export type * from './types.js';
export * from './formats.js';
