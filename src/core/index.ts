// Layer 0: ids, errors, assertions, sampling parameters, seeded randomness, fault points, and the
// one-reader event queue a back end hands the front end, with the text stream (detokenizer and
// stop strings) that fills it.
// Imports nothing from Tessera; everything may import it.
export * from './ids.js';
export * from './errors/index.js';
export * from './assert.js';
export * from './rng.js';
export * from './faults.js';
export * from './sampling.js';
export type * from './generate.js';
export type * from './batch.js';
export { PROMPT_LOGIT_ROWS } from './batch.js';
export { EventChannel } from './event-channel.js';
export { TextStream, type Detokenizer, type TextStep } from './text-stream.js';
export { TextOutput } from './text-output.js';
export * from './kv-view.js';
export * from './telemetry.js';
export * from './limits.js';
export type * from './page-map.js';
export * from './constraint.js';
export * from './cache-namespace.js';
