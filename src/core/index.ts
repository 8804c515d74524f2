// Layer 0: ids, errors, assertions, sampling parameters, seeded randomness, fault points.
// Imports nothing from Tessera; everything may import it.
export * from './ids.js';
export * from './errors/index.js';
export * from './assert.js';
export * from './rng.js';
export * from './faults.js';
export * from './sampling.js';
export type * from './generate.js';
export type * from './batch.js';
